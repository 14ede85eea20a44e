"""The Python module with vmmkit as PyTorch's pluggable allocator: the shim loaded with dlopen (no
LD_PRELOAD), so it sees no capture call, and a stand-in ``torch`` module whose CUDAGraph captures
through the stand-in runtime. A capture through CUDAGraph on another thread is told to vmmkit, so a
pause or resume beside it is refused with nothing done; once the capture has ended, they work. A
capture whose begin or end fails is told as CUDA left it. argv[1]: the libcudart to load, argv[2]:
the shim. Prints "ok python-pluggable-captures" and exits 0, or raises."""
import contextlib
import ctypes
import sys
import threading
import types

import vmmkit

cudart = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
SHIM = sys.argv[2]
H2D, D2H = 1, 2
MIB = 1 << 20
CAPTURE_STREAM = ctypes.c_void_p(0x5300)


def upload(ptr, data):
    assert cudart.cudaMemcpy(ctypes.c_void_p(ptr), data, ctypes.c_size_t(len(data)), H2D) == 0


def download(ptr, size):
    out = ctypes.create_string_buffer(size)
    assert cudart.cudaMemcpy(out, ctypes.c_void_p(ptr), ctypes.c_size_t(size), D2H) == 0
    return out.raw


# ---- The stand-in torch: the parts of PyTorch's API the module uses -------------------------------

current = threading.local()  # this thread's current stream
capturing = set()  # the streams capturing now


@contextlib.contextmanager
def on_stream(name):
    """torch.cuda.stream(...): torch.cuda.graph makes its side stream current around the capture."""
    before = current_stream()
    current.stream = name
    try:
        yield
    finally:
        current.stream = before


class CUDAPluggableAllocator:
    """Opens the shim with dlopen and finds the pair by name, as PyTorch does."""

    def __init__(self, path, alloc_name, free_name):
        lib = ctypes.CDLL(path)
        self.alloc = getattr(lib, alloc_name)
        self.alloc.argtypes, self.alloc.restype = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p], ctypes.c_void_p
        self.free = getattr(lib, free_name)
        self.free.argtypes, self.free.restype = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p], None


class CUDAGraph:
    """As PyTorch's: captures the current stream, and refuses an end on another stream before
    ending the capture. Its stream is the stand-in runtime's, which the shim (not preloaded) never
    sees. ``fail_begin``: the begin fails before any capture; ``invalidated``: the end ends the
    capture, then fails."""

    def __init__(self, fail_begin=False, invalidated=False):
        self.fail_begin, self.invalidated, self.stream = fail_begin, invalidated, None

    def capture_begin(self, pool=None, capture_error_mode="global"):
        if self.fail_begin:
            raise RuntimeError("capture_begin failed")
        self.stream = current_stream()
        assert cudart.cudaStreamBeginCapture(CAPTURE_STREAM, 0) == 0
        capturing.add(self.stream)

    def capture_end(self):
        if current_stream() != self.stream:
            raise RuntimeError("Capture must end on the same stream it began on.")
        graph = ctypes.c_void_p()
        assert cudart.cudaStreamEndCapture(CAPTURE_STREAM, ctypes.byref(graph)) == 0
        capturing.discard(self.stream)
        if self.invalidated:
            raise RuntimeError("operation failed due to a previous error during capture")


def current_stream():
    return getattr(current, "stream", "default stream")


fake_torch = types.ModuleType("torch")
fake_torch.cuda = types.SimpleNamespace(
    is_initialized=lambda: True,
    is_current_stream_capturing=lambda: current_stream() in capturing,
    current_stream=current_stream,
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


allocator = vmmkit.use_as_torch_allocator(SHIM)
vmmkit.use_as_torch_allocator(SHIM)  # a second call wraps nothing twice
weights = bytes((i * 11 + 5) % 251 for i in range(3 * MIB))
with vmmkit.region("weights", keep_contents=True):
    w = allocator.alloc(len(weights), 0, None)
assert w, "the pluggable allocation failed"
upload(w, weights)

# A capture on another thread: pauses and resumes on this one are refused, nothing is done.
began, done = threading.Event(), threading.Event()
failures = []


def capture():
    try:
        graph = CUDAGraph()
        with on_stream("side stream"):
            graph.capture_begin()
            began.set()
            done.wait()
            graph.capture_end()
    except BaseException as e:  # reported by the main thread
        failures.append(e)
        began.set()


capturer = threading.Thread(target=capture, daemon=True)  # a failed check must not wait for it
capturer.start()
began.wait()
assert not failures, failures
refused(vmmkit.pause, "weights")
refused(vmmkit.pause, None)
assert download(w, len(weights)) == weights, "a refused pause changed the weights"
done.set()
capturer.join()
assert not failures, failures
vmmkit.pause("weights")
with vmmkit.region("weights", keep_contents=True):
    assert not allocator.alloc(4096, 0, None), "an allocation into a paused tag was served"
vmmkit.resume("weights")
assert download(w, len(weights)) == weights, "the weights came back changed"

# A begin that failed is no capture.
try:
    CUDAGraph(fail_begin=True).capture_begin()
    raise AssertionError("the stand-in's begin did not fail")
except RuntimeError:
    pass
vmmkit.pause("weights")
vmmkit.resume("weights")

# An end refused before it reached CUDA (made on another stream) leaves the capture on; an end
# that ended an invalidated capture ended it.
graph = CUDAGraph()
with on_stream("side stream"):
    graph.capture_begin()
try:
    graph.capture_end()
    raise AssertionError("the stand-in's end on another stream did not fail")
except RuntimeError:
    pass
refused(vmmkit.pause, "weights")  # from the default stream: vmmkit's refusal, not the module's
with on_stream("side stream"):
    graph.capture_end()
graph = CUDAGraph(invalidated=True)
with on_stream("side stream"):
    graph.capture_begin()
    try:
        graph.capture_end()
        raise AssertionError("the stand-in's invalidated end did not fail")
    except RuntimeError:
        pass
vmmkit.pause("weights")
vmmkit.resume("weights")
assert download(w, len(weights)) == weights, "the weights came back changed"
allocator.free(w, len(weights), 0, None)
print("ok python-pluggable-captures")
