"""Memory tags of vmmkit for Python programs: pause a group of tensors' GPU memory and resume it at
the same addresses.

Works three ways. Under ``vmmkit run`` the shim is preloaded and PyTorch's caching allocator gets
all its segments from it. With :func:`use_as_torch_allocator` vmmkit is PyTorch's whole allocator
(what CUDA graph captures allocate is CUDA's, the graph's own).
And in a plain PyTorch program (neither of those) vmmkit serves the tagged tensors only
(:func:`use_for_tags`, which the first region makes the mode): each tag's tensors come from a
``torch.cuda.MemPool`` whose allocator is vmmkit, every other tensor stays PyTorch's own, and CUDA
graphs work as without vmmkit. Importable from a source checkout: put the repository's ``python``
folder on ``PYTHONPATH``. Needs nothing but the standard library; PyTorch is used when it is
loaded.

    import vmmkit
    with vmmkit.region("weights", keep_contents=True):
        model = build_model().cuda()
    with vmmkit.region("kv_cache"):
        cache = torch.empty(...)
    vmmkit.pause()              # every tag; the GPU memory goes back to the driver
    ...                         # another phase uses it
    vmmkit.resume()             # same addresses: tensors and captured CUDA graphs stay valid

Under ``vmmkit run`` and with :func:`use_for_tags` PyTorch caches the memory it gets: a tag's
tensors then come from ``torch.cuda.MemPool`` pools of their own, so that its segments hold the tag's
tensors only (and cached blocks of the tag are paused with it); while the tag is paused, a region
of it is refused, since PyTorch would hand out those blocks. With :func:`use_as_torch_allocator`
every tensor is an allocation of its own and no pool is needed.

The module's parts: ``_shim`` reaches the shim's functions; ``_torch`` chooses how vmmkit serves
PyTorch; ``_pools`` keeps the tags' memory pools and keeps regions and pauses of a tag apart;
``_captures`` deals with CUDA graph captures the shim cannot see; this file is the API.
"""

import contextlib
import ctypes

from . import _captures, _pools, _shim, _torch
from ._shim import VmmkitError, library
from ._pools import release_torch_pool
from ._torch import use_as_torch_allocator, use_for_tags

__all__ = ["region", "pause", "resume", "host_memory", "use_for_tags", "use_as_torch_allocator", "release_torch_pool",
           "library", "VmmkitError"]


@contextlib.contextmanager
def region(tag, keep_contents=False):
    """Allocations made in this block by this thread carry ``tag``, on every device.

    ``keep_contents``: a pause copies the tag's bytes to pinned host memory and a resume brings them
    back; otherwise their contents after a resume are undefined. The setting is the tag's, shared by
    all its allocations (the latest region opened sets it). Regions nest.
    """
    name = _shim.encode(tag)
    if _torch.serves_tags_by_default():
        use_for_tags()
    lib = _shim.library()
    pools = _pools.tag_pools(tag)
    _pools.enter_region(tag, pools)
    try:
        _shim.check(lib.vmmkit_region_begin(name, 1 if keep_contents else 0), "region_begin", tag)
        try:
            with _pools.routed(tag, pools):
                yield
        finally:
            _shim.check(lib.vmmkit_region_end(), "region_end", None)
    finally:
        _pools.leave_region(tag, pools)


def pause(tag=None):
    """Gives the tag's GPU memory back to the driver, keeping its addresses (every tag when None).

    Waits for the device's queued work first. While paused, freeing the tag's tensors works and a
    new allocation into the tag fails.

    Where PyTorch caches the tag's memory (under ``vmmkit run`` and serving the tags only), a pause
    is refused (``VmmkitError``, code 800) while a region of the tag is open on any thread, and a
    region of a paused tag is refused (code 2): PyTorch would hand out the tag's cached blocks
    there without asking vmmkit.

    Refused (code 900) while a CUDA graph is being captured (include/vmmkit/vmmkit.h says why): any
    capture under ``vmmkit run``; where PyTorch loaded the shim, a capture vmmkit was told of on any
    thread (``CUDAGraph``'s tell it; ``vmmkit_capture_begin`` for a program's own), or any capture
    on this thread's current PyTorch stream.
    """
    _captures.refuse_during_capture("pause", tag)
    name, lib = _shim.encode(tag), _shim.library()
    marked = _pools.mark_paused(tag)
    code = lib.vmmkit_pause(name)
    if code in (_shim.INVALID_VALUE, _shim.NOT_SUPPORTED, _shim.STREAM_CAPTURE_UNSUPPORTED):  # refused, nothing done
        _pools.unmark_paused(marked)
    _shim.check(code, "pause", tag)


def resume(tag=None):
    """Brings the tag's GPU memory back at the same addresses (every tag when None); refused, as
    ``pause`` is, while a CUDA graph is being captured."""
    _captures.refuse_during_capture("resume", tag)
    _shim.check(_shim.library().vmmkit_resume(_shim.encode(tag)), "resume", tag)
    _pools.mark_resumed(tag)


def host_memory():
    """(pinned, ready): the pinned host memory vmmkit holds for tags, and the part of it ready for
    the next pause. While a tag that keeps its contents is allocated, vmmkit pins host memory for
    its first pause in the background (``VMM_PIN_AHEAD``): once ``ready`` covers the tag, the
    first pause copies at the bus's speed."""
    pinned, ready = ctypes.c_size_t(0), ctypes.c_size_t(0)
    _shim.check(_shim.library().vmmkit_host_memory(ctypes.byref(pinned), ctypes.byref(ready)), "host_memory", None)
    return pinned.value, ready.value
