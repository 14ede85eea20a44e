"""A stand-in ``torch`` for the Python module's tests where vmmkit serves the tags only: the parts
of PyTorch's API the module uses, with a caching allocator. As PyTorch's, a MemPool's allocator
serves the pool only on the device current when the pool was made, and every other segment comes
from the CUDA runtime (the stand-in's). Two devices: device 0 current and with a context, device 1
without one until it is used. Captures run on the stand-in runtime, unseen by the shim; while one is
under way, the capturing thread's blocks come from the capture's pool (a MemPool named by its id,
else a private pool whose segments come from the runtime), its allocator called with the capture's
stream, as PyTorch's caching allocator does."""
import contextlib
import ctypes
import sys
import threading
import types

from pluggable_library import CUDAPluggableAllocator

CAPTURE_STREAM = ctypes.c_void_p(0x5400)
cudart = None  # set by install()


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
    another device, and with no allocator given, the pool's segments come from the runtime."""
    made = 0

    def __init__(self, allocator=None):
        self.allocator = allocator if allocator is not None else Runtime  # none: PyTorch's own (the runtime)
        self.device = Devices.current
        self.cached = {}  # size -> free blocks, as PyTorch keeps freed blocks of a pool's segments
        self.segments = []
        MemPool.made += 1
        self.id = (MemPool.made, 0)
        pools_by_id[self.id] = self


pools_by_id = {}


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
    """A block of ``size`` bytes on device ``on``: a cached one of the pool this thread's capture or
    routing gives that device, else a new segment."""
    Devices.contexts.add(on)
    stack = current.__dict__.get("pools", {}).get(on) or [None]
    capture_pool = getattr(current, "capture_pool", None)
    pool = capture_pool or stack[-1]
    if pool is not None and pool.cached.get(size):
        block = pool.cached[size].pop()
    else:
        served_by = pool.allocator if pool is not None and pool.device == on else Runtime
        block = served_by.alloc(size, on, CAPTURE_STREAM if capture_pool else None)
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
        # No pool given: a private pool of the graph's, whose segments come from the runtime.
        self.pool_used = pools_by_id[pool] if pool is not None else MemPool(allocator=Runtime)
        current.capturing, current.capture_pool = True, self.pool_used

    def capture_end(self):
        graph = ctypes.c_void_p()
        assert cudart.cudaStreamEndCapture(CAPTURE_STREAM, ctypes.byref(graph)) == 0
        current.capturing, current.capture_pool = False, None

    def pool(self):
        return self.pool_used.id


@contextlib.contextmanager
def graph(cuda_graph, pool=None, stream=None, capture_error_mode="global"):
    """As torch.cuda.graph: the capture begins (into ``pool`` when given) and ends around the block."""
    cuda_graph.capture_begin(*(() if pool is None else (pool,)), capture_error_mode=capture_error_mode)
    try:
        yield
    finally:
        cuda_graph.capture_end()


def install(runtime):
    """Makes the stand-in ``torch`` over ``runtime`` (the stand-in CUDA runtime, ctypes) the process's."""
    global cudart
    cudart = runtime
    sys.modules["torch"] = fake_torch
    return fake_torch


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
    graph=graph,
    graphs=types.SimpleNamespace(CUDAGraph=CUDAGraph))
fake_torch._C = types.SimpleNamespace(_cuda_hasPrimaryContext=lambda index: index in Devices.contexts)
