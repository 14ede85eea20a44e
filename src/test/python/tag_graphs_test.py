"""CUDA graphs whose memory carries a tag (vmmkit.cuda_graph) where vmmkit serves the tags only, over
the stand-in ``torch`` (standin_torch.py): a graph captures into a pool of its own whose allocator
is vmmkit, its segments vmmkit's even though the capture's stream captures (as cudaMalloc's, not
left to CUDA), and a pause of the tag gives them back: kept bytes come back at the same address,
discarded ones do not. A pause during the capture is refused; so is a capture of a paused tag, a
capture inside a region, and a pool that is not one of the tag's graphs'. A second graph shares the
first one's pool when asked, and a graph without vmmkit (torch.cuda.graph) stays PyTorch's own.
argv[1]: the libcudart to load. Prints "ok python-tag-graphs" and exits 0, or raises."""
import ctypes
import sys

import vmmkit
from vmmkit import _shim
from device_copies import download, upload
from standin_torch import CUDAGraph, delete, empty
import standin_torch

cudart = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
cudart.fake_cudart_malloc_calls.restype = ctypes.c_long
torch = standin_torch.install(cudart)
MIB = 1 << 20


def refused(call, code):
    try:
        call()
    except vmmkit.VmmkitError as e:
        assert e.code == code, (e.code, str(e))
        return
    raise AssertionError("accepted: %r" % call)


def capture(graph, tag, size, **kwargs):
    """Captures ``graph`` with a block of ``size`` bytes made in it and returns the block."""
    with vmmkit.cuda_graph(graph, tag=tag, **kwargs):
        return empty(size)


pattern = bytes((i * 17 + 1) % 251 for i in range(2 * MIB))
runtime_mallocs = cudart.fake_cudart_malloc_calls()

# The first cuda_graph makes vmmkit serve the tags; the capture's segment is vmmkit's, with the tag.
kept_graph = CUDAGraph()
with vmmkit.cuda_graph(kept_graph, tag="graphs", keep_contents=True):
    kept = empty(len(pattern))
    refused(lambda: vmmkit.pause("graphs"), 900)  # during a capture on this thread
assert _shim.loaded_shim_path() is not None, "the first cuda_graph did not load the shim"
assert cudart.fake_cudart_malloc_calls() == runtime_mallocs, "the capture's segment was not vmmkit's"
upload(cudart, kept, pattern)

scratch_graph = CUDAGraph()
scratch = capture(scratch_graph, "scratch", len(pattern))  # contents not kept
upload(cudart, scratch, pattern)
assert cudart.fake_cudart_malloc_calls() == runtime_mallocs, "the capture's segment was not vmmkit's"

# A plain torch.cuda.graph is PyTorch's own: its private pool's segment comes from the runtime.
plain = CUDAGraph()
with torch.cuda.graph(plain):
    untagged = empty(MIB)
assert cudart.fake_cudart_malloc_calls() == runtime_mallocs + 1, "a plain graph's segment was not the runtime's"
upload(cudart, untagged, b"\x07" * MIB)

vmmkit.pause()
refused(lambda: capture(CUDAGraph(), "graphs", 4096), 2)  # a paused tag's capture
vmmkit.resume()
assert download(cudart, kept, len(pattern)) == pattern, "the kept graph's bytes did not come back"
assert download(cudart, scratch, len(pattern)) != pattern, "the discarded graph's segment was not paused"
assert download(cudart, untagged, MIB) == b"\x07" * MIB, "the pause touched a plain graph's memory"

# A second graph shares the first one's pool when asked: the block freed there is handed out again.
delete(kept)
shared = CUDAGraph()
again = capture(shared, "graphs", len(pattern), pool=kept_graph.pool())
assert again == kept and shared.pool() == kept_graph.pool(), "the pool was not shared"
refused(lambda: capture(CUDAGraph(), "graphs", 4096, pool=plain.pool()), 1)  # not a pool of the tag's graphs
refused(lambda: capture(CUDAGraph(), "scratch", 4096, pool=kept_graph.pool()), 1)  # another tag's

# Inside a region the region's pool would take the capture's allocations: refused.
with vmmkit.region("weights"):
    refused(lambda: capture(CUDAGraph(), "graphs", 4096), 1)
print("ok python-tag-graphs")
