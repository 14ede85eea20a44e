"""The Python module serving the tagged tensors only: a PyTorch program neither run under `vmmkit run`
nor with vmmkit as its whole allocator, and a stand-in ``torch`` module whose caching allocator
takes each MemPool's segments from the pool's allocator and every other segment from the CUDA
runtime (the stand-in's). The first region loads the shim as the tags' pools' allocator; tagged
tensors are vmmkit's, the rest the runtime's; CUDAGraph is not refused, and tells vmmkit of its
captures (a pause on another thread is refused during one); a paused tag's region is
refused (PyTorch would hand out its cached blocks), and after a resume its cached block is usable
again and the kept bytes are back at the same address.
argv[1]: the libcudart to load. Prints "ok python-tag-pools" and exits 0, or raises."""
import contextlib
import ctypes
import os
import sys
import threading
import types
import warnings

import vmmkit
from vmmkit import _shim, _torch
from device_copies import download, upload
from pluggable_library import CUDAPluggableAllocator

cudart = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
cudart.fake_cudart_malloc_calls.restype = cudart.fake_cudart_free_calls.restype = ctypes.c_long
MIB = 1 << 20
CAPTURE_STREAM = ctypes.c_void_p(0x5400)


# ---- The stand-in torch: the parts of PyTorch's API the module uses, with a caching allocator ----

class Devices:
    """Two devices; device 0 current and with a context, device 1 without one until it is used."""
    current = 0
    contexts = {0}


@contextlib.contextmanager
def device(index):
    before, Devices.current = Devices.current, index
    Devices.contexts.add(index)  # as cudaSetDevice does
    try:
        yield
    finally:
        Devices.current = before


class MemPool:
    """As PyTorch's: the allocator serves the pool on the device current when it was made only; on
    another device the pool's segments come from the runtime."""

    def __init__(self, allocator=None):
        assert allocator is not None, "the module made a pool without vmmkit as its allocator"
        self.allocator = allocator
        self.device = Devices.current
        self.cached = {}  # size -> free blocks, as PyTorch keeps freed blocks of a pool's segments
        self.segments = []


class Runtime:
    """The default pool: segments from the CUDA runtime."""

    @staticmethod
    def alloc(size, device, stream):
        ptr = ctypes.c_void_p()
        assert cudart.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(size)) == 0
        return ptr.value

    @staticmethod
    def free(ptr, size, device, stream):
        assert cudart.cudaFree(ctypes.c_void_p(ptr)) == 0


current = threading.local()
owner = {}  # block -> (pool or None, size)


@contextlib.contextmanager
def use_mem_pool(pool, device=None):
    stack = current.__dict__.setdefault("pools", {}).setdefault(Devices.current if device is None else device, [])
    stack.append(pool)
    try:
        yield
    finally:
        stack.pop()


def empty(size, on=0):
    """A block of ``size`` bytes on device ``on``: a cached one of the pool this thread routes that
    device to, else a new segment."""
    Devices.contexts.add(on)
    stack = current.__dict__.get("pools", {}).get(on) or [None]
    pool = stack[-1]
    if pool is not None and pool.cached.get(size):
        block = pool.cached[size].pop()
    else:
        served_by = pool.allocator if pool is not None and pool.device == on else Runtime
        block = served_by.alloc(size, on, None)
        if not block:
            raise MemoryError("CUDA out of memory (the pool's allocator returned NULL)")
        if pool is not None:
            pool.segments.append((block, size))
    owner[block] = (pool, size)
    return block


def delete(block):
    pool, size = owner.pop(block)
    if pool is None:
        Runtime.free(block, size, 0, None)
    else:
        pool.cached.setdefault(size, []).append(block)


def release_pool(pool):
    """What PyTorch does once a pool is gone and the cache is emptied: its segments go back."""
    for block, size in pool.segments:
        pool.allocator.free(block, size, 0, None)


class CUDAGraph:
    """Captures on the stand-in runtime (unseen by the shim, which is not preloaded); the capturing
    thread's current stream captures meanwhile, as under torch.cuda.graph."""

    fail_to_begin = False

    def capture_begin(self, pool=None, capture_error_mode="global"):
        if CUDAGraph.fail_to_begin:
            raise RuntimeError("cannot begin the capture (a stand-in failure)")
        assert cudart.cudaStreamBeginCapture(CAPTURE_STREAM, 0) == 0
        current.capturing = True

    def capture_end(self):
        graph = ctypes.c_void_p()
        assert cudart.cudaStreamEndCapture(CAPTURE_STREAM, ctypes.byref(graph)) == 0
        current.capturing = False


fake_torch = types.ModuleType("torch")
fake_torch.cuda = types.SimpleNamespace(
    is_initialized=lambda: True,
    is_current_stream_capturing=lambda: getattr(current, "capturing", False),
    device_count=lambda: 2,
    current_device=lambda: Devices.current,
    device=device,
    MemPool=MemPool,
    use_mem_pool=use_mem_pool,
    memory=types.SimpleNamespace(CUDAPluggableAllocator=CUDAPluggableAllocator),
    graphs=types.SimpleNamespace(CUDAGraph=CUDAGraph))
fake_torch._C = types.SimpleNamespace(_cuda_hasPrimaryContext=lambda index: index in Devices.contexts)
sys.modules["torch"] = fake_torch


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
assert sorted(_torch._pools["weights"]) == [0], _torch._pools
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
assert sorted(_torch._pools["kv_cache"]) == [0, 1], _torch._pools
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

# A refused pause (an unknown tag) leaves the tags as they were.
refused(vmmkit.pause, "no such tag", 1)
enter_region("kv_cache")

upload(cudart, kv1, b"\x04" * (2 * MIB))  # resumed on device 1 too: usable
assert download(cudart, kv1, 2 * MIB) == b"\x04" * (2 * MIB)
for block in (w, kv, kv1, again, activations):
    delete(block)
for tag in ("weights", "kv_cache"):
    pools = _torch._pools[tag].values()
    vmmkit.release_torch_pool(tag)
    for pool in pools:
        release_pool(pool)
assert cudart.fake_cudart_free_calls() >= 1
print("ok python-tag-pools")
