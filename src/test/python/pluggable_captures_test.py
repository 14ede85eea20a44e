"""The Python module with vmmkit as PyTorch's pluggable allocator: the shim opened with dlopen (no
LD_PRELOAD), so it sees no capture call, and a stand-in ``torch`` module. CUDAGraph's captures tell
vmmkit when they begin and end: during one, an allocation or free on the capturing stream is the
runtime's (the graph's own node), a vmmkit block freed there is not handed out again before the
capture ends, other streams are served by vmmkit, and a pause or resume is refused with nothing
done. A capture the program tells vmmkit of itself (vmmkit_capture_begin / _end), made on another
thread, refuses them as well; once it has ended they work. A default tag reaches every tensor made
outside regions, an untagged block's excepted.
argv[1]: the libcudart to load, argv[2]: the shim. Prints "ok python-pluggable-captures" and exits
0, or raises."""
import ctypes
import os
import sys
import threading
import types

import vmmkit
from device_copies import download, upload
from pluggable_library import CUDAPluggableAllocator

cudart = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
SHIM = sys.argv[2]
MIB = 1 << 20
CAPTURE_STREAM = ctypes.c_void_p(0x5300)


def begin_capture():
    assert cudart.cudaStreamBeginCapture(CAPTURE_STREAM, 0) == 0  # the stand-in runtime's, unseen by the shim


def end_capture():
    graph = ctypes.c_void_p()
    assert cudart.cudaStreamEndCapture(CAPTURE_STREAM, ctypes.byref(graph)) == 0


# ---- The stand-in torch: the parts of PyTorch's API the module uses -------------------------------

class CUDAGraph:
    def capture_begin(self, pool=None, capture_error_mode="global"):
        if cudart.cudaStreamBeginCapture(CAPTURE_STREAM, 0) != 0:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")

    def capture_end(self):
        end_capture()


fake_torch = types.ModuleType("torch")
fake_torch.cuda = types.SimpleNamespace(
    is_initialized=lambda: True,
    is_current_stream_capturing=lambda: False,  # the captures below are not PyTorch's
    device_count=lambda: 1,
    memory=types.SimpleNamespace(CUDAPluggableAllocator=CUDAPluggableAllocator,
                                 change_current_allocator=lambda allocator: None),
    graphs=types.SimpleNamespace(CUDAGraph=CUDAGraph))
sys.modules["torch"] = fake_torch


# ---- The program ------------------------------------------------------------------------------

def refused(call, tag):
    try:
        call(tag)
    except vmmkit.VmmkitError as e:
        assert e.code == 900, (call.__name__, tag, e.code, str(e))  # cudaErrorStreamCaptureUnsupported
        return
    raise AssertionError("%s(%r) during a capture was accepted" % (call.__name__, tag))


os.environ["VMM_SERVES"] = "tags"  # as a parent serving its tags only would leave it
allocator = vmmkit.use_as_torch_allocator(SHIM)
assert os.environ["VMM_SERVES"] == "all", "the whole allocator kept a parent's VMM_SERVES"
vmmkit.use_as_torch_allocator(SHIM)  # a second call wraps nothing twice
try:  # a capture's memory is CUDA's here: vmmkit could not pause a tagged graph's
    with vmmkit.cuda_graph(CUDAGraph(), tag="graphs"):
        raise AssertionError("cuda_graph was accepted with vmmkit as the whole allocator")
except vmmkit.VmmkitError as e:
    assert e.code == 801 and "CUDA's" in str(e), (e.code, str(e))
lib = vmmkit.library()

weights = bytes((i * 11 + 5) % 251 for i in range(3 * MIB))
with vmmkit.region("weights", keep_contents=True):
    w = allocator.alloc(len(weights), 0, None)
assert w, "the pluggable allocation failed"
upload(cudart, w, weights)

# A capture told to vmmkit, on another thread: pauses on this one are refused, nothing is done.
began, done = threading.Event(), threading.Event()
failures = []


def capture():
    try:
        assert lib.vmmkit_capture_begin() == 0
        begin_capture()
        began.set()
        done.wait()
        end_capture()
        assert lib.vmmkit_capture_end() == 0
    except BaseException as e:  # reported by the main thread
        failures.append(e)
    finally:
        began.set()


capturer = threading.Thread(target=capture, daemon=True)  # a failed check must not wait for it
capturer.start()
began.wait()
assert not failures, failures
refused(vmmkit.pause, "weights")
refused(vmmkit.pause, None)
assert download(cudart, w, len(weights)) == weights, "a refused pause changed the weights"
done.set()
capturer.join()
assert not failures, failures
vmmkit.pause("weights")
with vmmkit.region("weights", keep_contents=True):
    assert not allocator.alloc(4096, 0, None), "an allocation into a paused tag was served"
# A resume during a told capture is refused too; the tag stays paused.
assert lib.vmmkit_capture_begin() == 0
refused(vmmkit.resume, "weights")
assert lib.vmmkit_capture_end() == 0
assert lib.vmmkit_capture_end() == 0  # an end with no capture under way changes nothing
# A CUDAGraph's capture is told: the capture's allocations and frees are the runtime's (the graph's
# own nodes), other streams' are vmmkit's, and a vmmkit block freed on the capturing stream is not
# handed out again before the capture ends (replays will still use it).
cudart.fake_cudart_malloc_calls.restype = cudart.fake_cudart_free_calls.restype = ctypes.c_long
mallocs, frees = cudart.fake_cudart_malloc_calls(), cudart.fake_cudart_free_calls()
before_capture = allocator.alloc(MIB, 0, None)
graph = CUDAGraph()
graph.capture_begin()
refused(vmmkit.resume, "weights")  # told by CUDAGraph: refused by vmmkit, the stand-in's PyTorch sees no capture
graphs = allocator.alloc(4096, 0, CAPTURE_STREAM)
assert graphs and cudart.fake_cudart_malloc_calls() == mallocs + 1, "the capture's allocation was not the runtime's"
allocator.free(graphs, 4096, 0, CAPTURE_STREAM)
assert cudart.fake_cudart_free_calls() == frees + 1, "the capture's free was not the runtime's"
allocator.free(before_capture, MIB, 0, CAPTURE_STREAM)
eager = allocator.alloc(MIB, 0, None)
assert eager and eager != before_capture, "a block freed during the capture was handed out during it"
assert cudart.fake_cudart_malloc_calls() == mallocs + 1, "an allocation on another stream was not vmmkit's"
graph.capture_end()
allocator.free(eager, MIB, 0, None)
# A capture that fails to begin leaves nothing told: the resume after it is not refused.
begin_capture()
try:
    CUDAGraph().capture_begin()
    raise AssertionError("the stand-in's second capture began")
except RuntimeError:
    pass
end_capture()
after = allocator.alloc(4096, 0, CAPTURE_STREAM)  # no capture now: vmmkit's
assert after and cudart.fake_cudart_malloc_calls() == mallocs + 1, "an allocation after the capture was the runtime's"
allocator.free(after, 4096, 0, CAPTURE_STREAM)
vmmkit.resume("weights")
assert download(cudart, w, len(weights)) == weights, "the weights came back changed"
allocator.free(w, len(weights), 0, None)

# As the whole allocator, a default tag reaches every tensor made outside regions; an untagged
# block's stay out of it; the cache goes back to the device on request.
vmmkit.default_tag("everything", keep_contents=True)
everything = allocator.alloc(MIB, 0, None)
upload(cudart, everything, weights[:MIB])
with vmmkit.untagged():
    outside = allocator.alloc(MIB, 0, None)
upload(cudart, outside, weights[MIB:2 * MIB])
vmmkit.pause("everything")
assert not allocator.alloc(4096, 0, None), "an allocation outside regions into the paused default tag was served"
assert download(cudart, outside, MIB) == weights[MIB:2 * MIB], "the pause touched an untagged block's memory"
vmmkit.resume("everything")
assert download(cudart, everything, MIB) == weights[:MIB], "the default tag's bytes were not kept"
vmmkit.default_tag(None)
allocator.free(everything, MIB, 0, None)
allocator.free(outside, MIB, 0, None)
assert vmmkit.release_cached() > 0, "the freed blocks' pages stayed cached"
print("ok python-pluggable-captures")
