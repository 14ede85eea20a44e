"""The way vmmkit serves a PyTorch program: preloaded by ``vmmkit run``, as PyTorch's whole
pluggable allocator (:func:`use_as_torch_allocator`), or as the allocator of the tags' memory pools
only (:func:`use_for_tags`)."""

import os
import sys
import threading

from . import _captures, _shim
from ._shim import VmmkitError

_lock = threading.Lock()
_pluggable = False      # vmmkit is PyTorch's whole allocator (use_as_torch_allocator)
_tag_allocator = None   # vmmkit serves the tags' pools only (use_for_tags): their allocator


def serves_tags_by_default():
    """Whether a region should make vmmkit serve the tags' pools: PyTorch is loaded and vmmkit is not."""
    return sys.modules.get("torch") is not None and not _shim.in_process()


def serves_all():
    """Whether vmmkit is PyTorch's whole allocator (no pools in between)."""
    return _pluggable


def tag_allocator():
    """The tags' pools' allocator where vmmkit serves the tags only, else None."""
    return _tag_allocator


def has_mem_pools(torch):
    return hasattr(torch.cuda, "MemPool") and hasattr(torch.cuda, "use_mem_pool")


def use_for_tags(path=None):
    """Makes vmmkit serve the tagged tensors only, in a program that is not run under ``vmmkit run``.

    Each tag's tensors come from memory pools of its own (``torch.cuda.MemPool``, one per device
    with a CUDA context) whose allocator is vmmkit (the shim, which PyTorch opens as a pluggable
    allocator); every other tensor stays with PyTorch's own allocator, and so do CUDA graphs'
    memory pools, so graphs captured over tagged tensors replay after a pause and resume. The first
    ``region`` calls this when vmmkit is not in the process yet and PyTorch is imported; calling it
    first only chooses ``path`` (and starts vmmkit beside the program's own start-up). No-op under
    ``vmmkit run`` or after :func:`use_as_torch_allocator`. Returns the pools' allocator (or None
    when no-op).

    ``torch.cuda.CUDAGraph``'s captures (``torch.cuda.graph``, ``torch.compile``'s graphs) tell
    vmmkit when they begin and end, so a pause or resume on another thread is refused during one
    (code 900) rather than invalidating it with its device synchronisation. A program that captures
    through the runtime directly tells vmmkit itself (``vmmkit_capture_begin`` / ``_end``).

    ``path``: the shim, as for :func:`use_as_torch_allocator`.
    """
    global _tag_allocator
    import torch
    with _lock:  # held throughout: two threads' first regions make one allocator
        if _tag_allocator is not None:
            return _tag_allocator
        if _pluggable or _shim.preloaded():
            return None
        if not has_mem_pools(torch):
            raise VmmkitError("this PyTorch has no torch.cuda.MemPool with an allocator (2.6 or later has): run "
                              "the program under `vmmkit run`, or use vmmkit.use_as_torch_allocator()",
                              _shim.NOT_SUPPORTED)
        # Read when vmmkit starts, on the shim's load: the rest of the program's memory is PyTorch's
        # own by design, so vmmkit says nothing at exit about memory it did not serve. Set, not
        # defaulted: a parent process's value (another way in) is inherited.
        os.environ["VMM_SERVES"] = "tags"
        # The pools' segments: PyTorch's caching allocator owns them, also while a graph captures
        # into a pool (cuda_graph), so vmmkit allocates them as cudaMalloc does (vmmkit_pool_alloc).
        _tag_allocator = _pluggable_allocator(torch, path, "vmmkit_pool_alloc", "vmmkit_pool_free")
        _captures.tell_captures(torch.cuda.graphs.CUDAGraph)
        return _tag_allocator


def _pluggable_allocator(torch, path, alloc="vmmkit_torch_alloc", free="vmmkit_torch_free"):
    """The shim as a PyTorch pluggable allocator (PyTorch opens it with dlopen) through the pair
    ``alloc``/``free``; ``path`` as for :func:`use_as_torch_allocator`."""
    shim = path or _shim.loaded_shim_path() or _shim.checkout_shim_path()
    if not os.path.exists(shim):
        raise VmmkitError("no vmmkit shim at %s: build it first (./mvnw -DskipTests package)" % shim,
                          _shim.NOT_SUPPORTED)
    return torch.cuda.memory.CUDAPluggableAllocator(shim, alloc, free)


def use_as_torch_allocator(path=None):
    """Makes vmmkit PyTorch's CUDA allocator (before the first CUDA allocation).

    ``torch.cuda.CUDAGraph``'s captures (``torch.cuda.graph``, ``make_graphed_callables``) tell
    vmmkit when they begin and end. A capture's allocations and frees on its streams are then
    CUDA's, the graph's own memory, as with PyTorch's cudaMallocAsync backend; everything else is
    vmmkit's. As with that backend, memory a capture allocated is backed once the graph has run,
    and ``torch.compile``'s CUDA graph trees (``mode="reduce-overhead"``) raise: PyTorch asks about
    pools only its own caching allocator has (they work with :func:`use_for_tags` and under
    ``vmmkit run``). A pause or resume on another thread during a capture is refused (code 900).

    ``path``: the shim; by default the one loaded in this process, else ``VMMKIT_SHIM``, else this
    checkout's ``target/native/libvmmkit_preload.so``.
    """
    global _pluggable
    import torch
    os.environ["VMM_SERVES"] = "all"  # every allocation is vmmkit's, whatever a parent process set
    allocator = _pluggable_allocator(torch, path)
    torch.cuda.memory.change_current_allocator(allocator)
    _pluggable = True
    _captures.tell_captures(torch.cuda.graphs.CUDAGraph)
    return allocator
