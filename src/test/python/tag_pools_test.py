"""The Python module serving the tagged tensors only: a PyTorch program neither run under `vmmkit run`
nor with vmmkit as its whole allocator, and a stand-in ``torch`` module whose caching allocator
takes each MemPool's segments from the pool's allocator and every other segment from the CUDA
runtime (the stand-in's). The first region loads the shim as the tags' pools' allocator; tagged
tensors are vmmkit's, the rest the runtime's; CUDAGraph is not refused, and tells vmmkit of its
captures (a pause on another thread is refused during one); a paused tag's region is
refused, and so is a pause while a region of the tag is open on any thread (PyTorch would hand out
its cached blocks); after a resume its cached block is usable again and the kept bytes are back at
the same address.
argv[1]: the libcudart to load. Prints "ok python-tag-pools" and exits 0, or raises."""
import ctypes
import os
import sys
import threading
import warnings

import vmmkit
from vmmkit import _pools, _shim
from device_copies import download, upload
from standin_torch import CUDAGraph, delete, empty, release_pool
import standin_torch

cudart = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
cudart.fake_cudart_malloc_calls.restype = cudart.fake_cudart_free_calls.restype = ctypes.c_long
standin_torch.install(cudart)
MIB = 1 << 20


# ---- The program ------------------------------------------------------------------------------

def refused(call, tag, code):
    try:
        call(tag)
    except vmmkit.VmmkitError as e:
        assert e.code == code, (call.__name__, tag, e.code, str(e))
        return str(e)
    raise AssertionError("%s(%r) was accepted" % (call.__name__, tag))


def enter_region(tag):
    with vmmkit.region(tag):
        pass


assert _shim.loaded_shim_path() is None, "the shim was loaded before the first region"
runtime_mallocs = cudart.fake_cudart_malloc_calls()
weights = bytes((i * 13 + 7) % 251 for i in range(3 * MIB))
with warnings.catch_warnings(record=True) as warned:
    warnings.simplefilter("always")
    with vmmkit.region("weights", keep_contents=True):
        w = empty(len(weights))
        early = empty(4096, on=1)  # device 1 had no context as the region began: PyTorch's own
assert _shim.loaded_shim_path() is not None, "the first region did not load the shim"
assert sorted(_pools._pools["weights"]) == [0], _pools._pools
assert len(warned) == 1 and "cuda:1 had no CUDA context" in str(warned[0].message), [str(x.message) for x in warned]
assert cudart.fake_cudart_malloc_calls() == runtime_mallocs + 1, "the untagged tensor on cuda:1 was not the runtime's"
delete(early)
runtime_mallocs = cudart.fake_cudart_malloc_calls()
assert os.environ.get("VMM_SERVES") == "tags", os.environ.get("VMM_SERVES")
assert cudart.fake_cudart_malloc_calls() == runtime_mallocs, "a tagged tensor came from the runtime"
upload(cudart, w, weights)
with vmmkit.region("kv_cache"):
    kv = empty(2 * MIB)
    scratch = empty(1 * MIB)
    kv1 = empty(2 * MIB, on=1)  # device 1 has a context now: the tag's pool there is vmmkit's
delete(scratch)  # cached in the KV cache's pool
assert sorted(_pools._pools["kv_cache"]) == [0, 1], _pools._pools
assert cudart.fake_cudart_malloc_calls() == runtime_mallocs, "a tagged tensor came from the runtime"
upload(cudart, kv1, b"\x03" * (2 * MIB))
activations = empty(1 * MIB)  # outside every region: PyTorch's own memory
assert cudart.fake_cudart_malloc_calls() == runtime_mallocs + 1, "an untagged tensor did not come from the runtime"
upload(cudart, activations, b"\x05" * MIB)

# CUDA graphs are PyTorch's own business here: not refused; a pause during one on this thread is
# refused by the module, and during one on another thread by vmmkit, which CUDAGraph told.
graph = CUDAGraph()
graph.capture_begin()
refused(vmmkit.pause, None, 900)
graph.capture_end()
began, done, failures = threading.Event(), threading.Event(), []


def capture_on_another_thread():
    try:
        other = CUDAGraph()
        other.capture_begin()
        began.set()
        done.wait()
        other.capture_end()
    except BaseException as e:  # reported by the main thread
        failures.append(e)
    finally:
        began.set()


capturer = threading.Thread(target=capture_on_another_thread, daemon=True)
capturer.start()
began.wait()
assert not failures, failures
refused(vmmkit.pause, "weights", 900)
refused(vmmkit.resume, None, 900)
assert download(cudart, w, len(weights)) == weights, "a refused pause changed the weights"
done.set()
capturer.join()
assert not failures, failures
with vmmkit.region("weights", keep_contents=True):
    pass  # the refused pauses (nothing done) left the tag as it was: not paused

# A pause while a region of the tag is open, on another thread or this one, is refused: PyTorch
# could hand out the tag's cached blocks in it afterwards. Other tags still pause.
inside, leave = threading.Event(), threading.Event()


def hold_a_region():
    with vmmkit.region("kv_cache"):
        inside.set()
        leave.wait()


holder = threading.Thread(target=hold_a_region, daemon=True)
holder.start()
inside.wait()
assert "a region or capture of 'kv_cache' is open" in refused(vmmkit.pause, "kv_cache", 800)
refused(vmmkit.pause, None, 800)
vmmkit.pause("weights")
vmmkit.resume("weights")
assert download(cudart, w, len(weights)) == weights, "a pause beside another tag's region changed the weights"
leave.set()
holder.join()
with vmmkit.region("kv_cache"):
    refused(vmmkit.pause, "kv_cache", 800)
# A capture that fails to begin leaves nothing told: the pause below is not refused.
CUDAGraph.fail_to_begin = True
try:
    CUDAGraph().capture_begin()
    raise AssertionError("the failing capture began")
except RuntimeError as e:
    assert "cannot begin" in str(e), e
CUDAGraph.fail_to_begin = False

vmmkit.pause()
assert "resume it first" in refused(enter_region, "kv_cache", 2)
assert download(cudart, activations, MIB) == b"\x05" * MIB, "a pause touched PyTorch's own memory"
vmmkit.resume("kv_cache")
with vmmkit.region("kv_cache"):
    again = empty(1 * MIB)
assert again == scratch, "the KV cache's cached block was not handed out again"
upload(cudart, again, b"\x09" * MIB)
assert download(cudart, again, MIB) == b"\x09" * MIB
refused(enter_region, "weights", 2)  # still paused
vmmkit.resume()
assert download(cudart, w, len(weights)) == weights, "the weights came back changed"
with vmmkit.region("weights", keep_contents=True):
    pass  # resumed: allowed again

# An untagged block inside a region: its tensors are PyTorch's own again, the region's after it.
# A default tag cannot be set here: vmmkit does not serve the untagged tensors.
mallocs = cudart.fake_cudart_malloc_calls()
with vmmkit.region("weights", keep_contents=True):
    with vmmkit.untagged():
        plain = empty(4096)
    assert cudart.fake_cudart_malloc_calls() == mallocs + 1, "an untagged block's tensor did not come from the runtime"
    tagged_again = empty(8192)
    assert cudart.fake_cudart_malloc_calls() == mallocs + 1, "the region's tensor after the untagged block was not vmmkit's"
delete(plain)
delete(tagged_again)
assert refused(vmmkit.default_tag, "everything", 801).startswith("default_tag('everything'): vmmkit does not serve")

# A refused pause (an unknown tag) leaves the tags as they were.
refused(vmmkit.pause, "no such tag", 1)
enter_region("kv_cache")

upload(cudart, kv1, b"\x04" * (2 * MIB))  # resumed on device 1 too: usable
assert download(cudart, kv1, 2 * MIB) == b"\x04" * (2 * MIB)
for block in (w, kv, kv1, again, activations):
    delete(block)
for tag in ("weights", "kv_cache"):
    pools = _pools._pools[tag].values()
    vmmkit.release_torch_pool(tag)
    for pool in pools:
        release_pool(pool)
assert cudart.fake_cudart_free_calls() >= 1
print("ok python-tag-pools")
