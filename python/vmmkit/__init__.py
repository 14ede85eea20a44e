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

A trainer that pauses everything it holds sets a default tag instead of regions
(``vmmkit.default_tag("train", keep_contents=True)``): it reaches the threads PyTorch allocates
on by itself; ``with vmmkit.untagged():`` keeps a block's tensors out of it.

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
import sys
import threading

from . import _captures, _pools, _shim, _torch
from ._shim import VmmkitError, library
from ._pools import release_torch_pool
from ._torch import use_as_torch_allocator, use_for_tags

__all__ = ["region", "untagged", "default_tag", "cuda_graph", "pause", "resume", "release_cached", "host_memory",
           "use_for_tags", "use_as_torch_allocator", "release_torch_pool", "library", "VmmkitError"]

_thread = threading.local()  # regions: this thread's regions open now


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
    pools = _pools.tag_pools(tag)
    _pools.enter_region(tag, bool(pools))
    _thread.regions = getattr(_thread, "regions", 0) + 1
    try:
        with _shim.tag_region(name, tag, keep_contents), _pools.routed(tag, pools):
            yield
    finally:
        _thread.regions -= 1
        _pools.leave_region(tag, bool(pools))


@contextlib.contextmanager
def untagged(pool=None):
    """Allocations made in this block by this thread carry no tag, not even the :func:`default_tag`;
    a region opened inside it tags again. Where PyTorch caches memory between the program and vmmkit
    (under ``vmmkit run``, serving the tags only) its tensors come from a ``torch.cuda.MemPool`` of
    untagged memory, so no cached block of a tag is handed out in it: ``pool``, else one the module
    keeps for untagged blocks. (torch_memory_saver's ``disable()``.)"""
    pools = _pools.untagged_pools()
    if pools is not None and pool is not None:
        pools = {device: pool for device in pools}
    with contextlib.ExitStack() as stack:
        if _shim.in_process():
            stack.enter_context(_shim.tag_region(None, None, False))
        stack.enter_context(_pools.routed("(untagged)", pools))
        yield


def default_tag(tag, keep_contents=False):
    """From now on, allocations made outside every region, on every thread, carry ``tag`` (None:
    none again): a trainer that pauses all it holds at once, the gradients PyTorch's autograd makes
    on threads of its own included. ``keep_contents`` is the tag's setting, as a region of it opened
    now would set it. Allocations made before keep the tag they carry; :func:`untagged` keeps a
    block's allocations out of it.

    Needs vmmkit to serve every allocation: under ``vmmkit run`` or after
    :func:`use_as_torch_allocator` (refused with code 801 where it serves the tags only, whose
    untagged tensors are PyTorch's own). Under ``vmmkit run`` PyTorch's own pool then holds the
    tag's memory, its cached free blocks included, which a pause takes and a resume brings back as
    any of the tag's. So while the tag is paused, allocate only inside regions or :func:`untagged`
    blocks (as with torch_memory_saver's ``TMS_INIT_ENABLE``): PyTorch's cache would hand out the
    tag's blocks elsewhere without asking vmmkit."""
    name = _shim.encode(tag)
    if _torch.tag_allocator() is not None or (not _shim.preloaded() and not _torch.serves_all()):
        raise VmmkitError("default_tag(%r): vmmkit does not serve every allocation in this process; run it under "
                          "`vmmkit run` or call vmmkit.use_as_torch_allocator() first" % tag, _shim.NOT_SUPPORTED)
    _shim.check(_shim.library().vmmkit_default_tag(name, 1 if keep_contents else 0), "default_tag", tag)


@contextlib.contextmanager
def cuda_graph(graph, tag="cuda_graph", keep_contents=False, pool=None, stream=None, capture_error_mode="global"):
    """``torch.cuda.graph(graph, pool, stream, capture_error_mode)`` whose memory carries ``tag``: a
    pause of the tag gives the graph's memory back with the rest of the tag, and a resume brings it
    back at the same addresses, so the graph replays after it (not while it is paused).
    ``keep_contents`` as for :func:`region`: a graph's scratch buffers need none, but a static
    output read after a resume, before a replay, is undefined unless kept.

    Where vmmkit serves the tags only, the graph captures into a pool of its own whose allocator is
    vmmkit; ``pool`` may name another graph's of the tag (``other.pool()``) to share it, as
    ``torch.cuda.graph`` shares pools. Under ``vmmkit run`` the graph's private pool gets its
    segments from cudaMalloc while this thread is in the tag's region; allocations this thread makes
    on other streams during the capture carry the tag as well (keep them out of the capture). As
    PyTorch's whole allocator a capture's memory is CUDA's, and this is refused (801).

    Refused inside a region (code 1): the region's pool would take the capture's allocations. While
    the tag is paused a capture of it is refused (code 2), and a pause of the tag during the
    capture is refused (900, the capture is told; 800 for the tag's open capture)."""
    name = _shim.encode(tag)
    torch = sys.modules.get("torch")
    if torch is None:
        raise VmmkitError("cuda_graph(%r) captures through PyTorch: import torch first" % tag, _shim.NOT_SUPPORTED)
    if getattr(_thread, "regions", 0):
        raise VmmkitError("cuda_graph(%r) inside a region: the region's pool would take the capture's "
                          "allocations; capture outside it" % tag, _shim.INVALID_VALUE)
    if _torch.serves_tags_by_default():
        use_for_tags()
    if _torch.serves_all():
        raise VmmkitError("cuda_graph(%r): with vmmkit as PyTorch's whole allocator a capture's memory is "
                          "CUDA's (the graph's own), which vmmkit cannot pause; capture with "
                          "torch.cuda.graph, or serve the tags only (use_for_tags) or run under `vmmkit run`"
                          % tag, _shim.NOT_SUPPORTED)
    _pools.enter_region(tag, True)
    try:
        capture_pool = _pools.graph_pool(tag, graph, pool)
        with torch.cuda.graph(graph, pool=capture_pool, stream=stream, capture_error_mode=capture_error_mode), \
                _shim.tag_region(name, tag, keep_contents):
            yield
    finally:
        _pools.leave_region(tag, True)


def pause(tag=None, keep_contents=None):
    """Gives the tag's GPU memory back to the driver, keeping its addresses (every tag when None).

    Waits for the device's queued work first. While paused, freeing the tag's tensors works and a
    new allocation into the tag fails.

    ``keep_contents`` (a named tag only, ``vmmkit_pause_keeping``): the tag's setting from this pause
    on, on every device, as a region of it opened now would set it; None keeps the setting its
    regions gave. So a kept tag's contents can be discarded at one pause (vLLM's sleep level 2 for
    its weights) and kept again at the next.

    Where PyTorch caches the tag's memory (under ``vmmkit run`` and serving the tags only), a pause
    is refused (``VmmkitError``, code 800) while a region or a :func:`cuda_graph` capture of the tag
    is open on any thread, and a region or capture of a paused tag is refused (code 2): PyTorch
    would hand out the tag's cached blocks there without asking vmmkit.

    Refused (code 900) while a CUDA graph is being captured (include/vmmkit/vmmkit.h says why): any
    capture under ``vmmkit run``; where PyTorch loaded the shim, a capture vmmkit was told of on any
    thread (``CUDAGraph``'s tell it; ``vmmkit_capture_begin`` for a program's own), or any capture
    on this thread's current PyTorch stream.
    """
    if keep_contents is not None and tag is None:
        raise VmmkitError("pause(keep_contents=...) needs a tag: keeping contents is each tag's setting",
                          _shim.INVALID_VALUE)
    _captures.refuse_during_capture("pause", tag)
    name, lib = _shim.encode(tag), _shim.library()
    marked = _pools.mark_paused(tag)
    if keep_contents is None:
        code = lib.vmmkit_pause(name)
    else:
        code = lib.vmmkit_pause_keeping(name, 1 if keep_contents else 0)
    if code in (_shim.INVALID_VALUE, _shim.NOT_SUPPORTED, _shim.STREAM_CAPTURE_UNSUPPORTED):  # refused, nothing done
        _pools.unmark_paused(marked)
    _shim.check(code, "pause", tag)


def resume(tag=None):
    """Brings the tag's GPU memory back at the same addresses (every tag when None); refused, as
    ``pause`` is, while a CUDA graph is being captured."""
    _captures.refuse_during_capture("resume", tag)
    _shim.check(_shim.library().vmmkit_resume(_shim.encode(tag)), "resume", tag)
    _pools.mark_resumed(tag)


def release_cached(empty_torch_cache=True):
    """Gives the device memory vmmkit caches (freed blocks' pages on every device, tags' included)
    back to the driver, after the device work its frees wait for; returns the bytes given back.
    A free keeps its memory in vmmkit's cache, so ``torch.cuda.empty_cache()`` alone does not lower
    the device's used memory: a program that frees memory for another process calls this.
    ``empty_torch_cache``: where PyTorch caches between the program and vmmkit (under ``vmmkit run``,
    serving the tags only), empty PyTorch's cache first, whose segments are live to vmmkit."""
    torch = sys.modules.get("torch")
    if empty_torch_cache and torch is not None and not _torch.serves_all() and _shim.in_process():
        torch.cuda.empty_cache()
    released = ctypes.c_size_t(0)
    _shim.check(_shim.library().vmmkit_release_cached(ctypes.byref(released)), "release_cached", None)
    return released.value


def host_memory():
    """(pinned, ready): the pinned host memory vmmkit holds for tags, and the part of it ready for
    the next pause. While a tag that keeps its contents is allocated, vmmkit pins host memory for
    its first pause in the background (``VMM_PIN_AHEAD``): once ``ready`` covers the tag, the
    first pause copies at the bus's speed."""
    pinned, ready = ctypes.c_size_t(0), ctypes.c_size_t(0)
    _shim.check(_shim.library().vmmkit_host_memory(ctypes.byref(pinned), ctypes.byref(ready)), "host_memory", None)
    return pinned.value, ready.value
