"""The Python module serving the tagged tensors only: a PyTorch program neither run under `vmmkit run`
nor with vmmkit as its whole allocator, and a stand-in ``torch`` module whose caching allocator
takes each MemPool's segments from the pool's allocator and every other segment from the CUDA
runtime (the stand-in's). The first region loads the shim as the tags' pools' allocator; tagged
tensors are vmmkit's, the rest the runtime's; CUDAGraph is not refused; a paused tag's region is
refused (PyTorch would hand out its cached blocks), and after a resume its cached block is usable
again and the kept bytes are back at the same address.
argv[1]: the libcudart to load. Prints "ok python-tag-pools" and exits 0, or raises."""
import contextlib
import ctypes
import os
import sys
import threading
import types

import vmmkit
from device_copies import download, upload

cudart = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
cudart.fake_cudart_malloc_calls.restype = cudart.fake_cudart_free_calls.restype = ctypes.c_long
MIB = 1 << 20
CAPTURE_STREAM = ctypes.c_void_p(0x5400)


# ---- The stand-in torch: the parts of PyTorch's API the module uses, with a caching allocator ----

class CUDAPluggableAllocator:
    """Opens the shim with dlopen and finds the pair by name, as PyTorch does."""

    def __init__(self, path, alloc_name, free_name):
        lib = ctypes.CDLL(path)
        self.alloc = getattr(lib, alloc_name)
        self.alloc.argtypes, self.alloc.restype = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p], ctypes.c_void_p
        self.free = getattr(lib, free_name)
        self.free.argtypes, self.free.restype = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p], None

    def allocator(self):
        return self


class MemPool:
    def __init__(self, allocator=None):
        assert allocator is not None, "the module made a pool without vmmkit as its allocator"
        self.allocator = allocator
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
    stack = current.__dict__.setdefault("pools", [])
    stack.append(pool)
    try:
        yield
    finally:
        stack.pop()


def empty(size):
    """A block of ``size`` bytes: a cached one of the current pool, else a new segment."""
    stack = current.__dict__.get("pools") or [None]
    pool = stack[-1]
    if pool is not None and pool.cached.get(size):
        block = pool.cached[size].pop()
    else:
        block = (pool.allocator if pool else Runtime).alloc(size, 0, None)
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


capturing = False


class CUDAGraph:
    def capture_begin(self, pool=None, capture_error_mode="global"):
        global capturing
        assert cudart.cudaStreamBeginCapture(CAPTURE_STREAM, 0) == 0
        capturing = True

    def capture_end(self):
        global capturing
        graph = ctypes.c_void_p()
        assert cudart.cudaStreamEndCapture(CAPTURE_STREAM, ctypes.byref(graph)) == 0
        capturing = False


fake_torch = types.ModuleType("torch")
fake_torch.cuda = types.SimpleNamespace(
    is_initialized=lambda: True,
    is_current_stream_capturing=lambda: capturing,
    device_count=lambda: 1,
    MemPool=MemPool,
    use_mem_pool=use_mem_pool,
    memory=types.SimpleNamespace(CUDAPluggableAllocator=CUDAPluggableAllocator),
    graphs=types.SimpleNamespace(CUDAGraph=CUDAGraph))
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


assert vmmkit._loaded_shim_path() is None, "the shim was loaded before the first region"
runtime_mallocs = cudart.fake_cudart_malloc_calls()
weights = bytes((i * 13 + 7) % 251 for i in range(3 * MIB))
with vmmkit.region("weights", keep_contents=True):
    w = empty(len(weights))
assert vmmkit._loaded_shim_path() is not None, "the first region did not load the shim"
assert os.environ.get("VMM_SERVES") == "tags", os.environ.get("VMM_SERVES")
assert cudart.fake_cudart_malloc_calls() == runtime_mallocs, "a tagged tensor came from the runtime"
upload(cudart, w, weights)
with vmmkit.region("kv_cache"):
    kv = empty(2 * MIB)
    scratch = empty(1 * MIB)
delete(scratch)  # cached in the KV cache's pool
assert cudart.fake_cudart_malloc_calls() == runtime_mallocs, "a tagged tensor came from the runtime"
activations = empty(1 * MIB)  # outside every region: PyTorch's own memory
assert cudart.fake_cudart_malloc_calls() == runtime_mallocs + 1, "an untagged tensor did not come from the runtime"
upload(cudart, activations, b"\x05" * MIB)

# CUDA graphs are PyTorch's own business here: not refused; a pause during one on this thread is.
graph = CUDAGraph()
graph.capture_begin()
refused(vmmkit.pause, None, 900)
graph.capture_end()

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

for block in (w, kv, again, activations):
    delete(block)
for tag in ("weights", "kv_cache"):
    pool = vmmkit._pools[tag]
    vmmkit.release_torch_pool(tag)
    release_pool(pool)
assert cudart.fake_cudart_free_calls() >= 1
print("ok python-tag-pools")
