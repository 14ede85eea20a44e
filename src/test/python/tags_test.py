"""The Python module of vmmkit under `vmmkit run`, without PyTorch: allocations through the CUDA
runtime (ctypes), tagged with vmmkit.region, paused and resumed. argv[1]: the libcudart to load.
Prints "ok python-tags" and exits 0, or raises."""
import ctypes
import sys
import types

import vmmkit
from device_copies import download, malloc as cuda_malloc, upload

cudart = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
MIB = 1 << 20


def malloc(size):
    return cuda_malloc(cudart, size)


try:  # a graph's capture goes through PyTorch, which this program has not imported
    with vmmkit.cuda_graph(object(), tag="graphs"):
        raise AssertionError("cuda_graph was accepted without PyTorch")
except vmmkit.VmmkitError as e:
    assert e.code == 801 and "import torch" in str(e), (e.code, str(e))

weights = bytes((i * 7 + 3) % 251 for i in range(3 * MIB))
with vmmkit.region("weights", keep_contents=True):
    rc, w = malloc(len(weights))
    assert rc == 0
upload(cudart, w, weights)
with vmmkit.region("kv_cache"):
    rc, kv = malloc(2 * MIB)
    assert rc == 0

vmmkit.pause()
with vmmkit.region("weights", keep_contents=True):
    rc, _ = malloc(4096)
    assert rc == 2, rc  # cudaErrorMemoryAllocation: the tag is paused
try:
    vmmkit.pause("no such tag")
    raise AssertionError("an unknown tag was accepted")
except vmmkit.VmmkitError as e:
    assert e.code == 1, e.code
vmmkit.resume("kv_cache")
# While a CUDA graph is being captured (the stand-in runtime's capture, any stream), nothing is done.
stream = ctypes.c_void_p(0x5200)
assert cudart.cudaStreamBeginCapture(stream, 0) == 0
try:
    vmmkit.resume("weights")
    raise AssertionError("a resume during a stream capture was accepted")
except vmmkit.VmmkitError as e:
    assert e.code == 900 and "captured" in str(e), (e.code, str(e))  # cudaErrorStreamCaptureUnsupported
graph = ctypes.c_void_p()
assert cudart.cudaStreamEndCapture(stream, ctypes.byref(graph)) == 0
# A capture PyTorch reports on this thread's current stream (what torch.cuda.graph makes) is refused
# by the module itself, before vmmkit is asked: as PyTorch's pluggable allocator vmmkit sees none.
fake_torch = types.ModuleType("torch")
fake_torch.cuda = types.SimpleNamespace(is_initialized=lambda: True, is_current_stream_capturing=lambda: True)
sys.modules["torch"] = fake_torch
try:
    vmmkit.resume("weights")
    raise AssertionError("a resume during PyTorch's capture was accepted")
except vmmkit.VmmkitError as e:
    assert e.code == 900, e.code
finally:
    del sys.modules["torch"]
vmmkit.resume("weights")
assert download(cudart, w, len(weights)) == weights, "the weights came back changed"
pinned, ready = vmmkit.host_memory()  # the copy's host memory, kept for the next pause
assert ready >= len(weights) and pinned >= ready, (pinned, ready)
upload(cudart, kv, b"\x01" * (2 * MIB))
assert download(cudart, kv, 2 * MIB) == b"\x01" * (2 * MIB)
# A pause may set its tag's setting, as vLLM's sleep levels choose per sleep: discarded this time
# (the emulation backs the resume with fresh pages), then kept again.
vmmkit.pause("weights", keep_contents=False)
vmmkit.resume("weights")
assert download(cudart, w, len(weights)) != weights, "a pause told to discard kept the weights"
upload(cudart, w, weights)
vmmkit.pause("weights", keep_contents=True)
vmmkit.resume("weights")
assert download(cudart, w, len(weights)) == weights, "a pause told to keep lost the weights"
for call in (lambda: vmmkit.pause(keep_contents=False), lambda: vmmkit.pause("never opened", keep_contents=False)):
    try:  # a setting for every tag, or for a tag no region made
        call()
        raise AssertionError("a pause's setting was accepted without a known tag")
    except vmmkit.VmmkitError as e:
        assert e.code == 1, e.code
assert cudart.cudaFree(ctypes.c_void_p(w)) == 0
assert cudart.cudaFree(ctypes.c_void_p(kv)) == 0
print("ok python-tags")
