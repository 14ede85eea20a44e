"""vmmkit in a PyTorch program: the way it serves PyTorch (preloaded by ``vmmkit run``, as its whole
pluggable allocator, or as the allocator of the tags' memory pools only), those pools, and CUDA graph
captures, which the shim does not see where PyTorch loaded it."""

import contextlib
import os
import sys
import threading
import warnings

from . import _shim
from ._shim import VmmkitError

_lock = threading.Lock()
_pluggable = False      # vmmkit is PyTorch's whole allocator (use_as_torch_allocator)
_tag_allocator = None   # vmmkit serves the tags' pools only (use_for_tags): their allocator
_pools = {}             # tag -> {device: torch.cuda.MemPool}
_paused = set()         # tags with pools, paused through this module
_open = {}              # tag with pools -> its regions open now, on any thread


def serves_tags_by_default():
    """Whether a region should make vmmkit serve the tags' pools: PyTorch is loaded and vmmkit is not."""
    return sys.modules.get("torch") is not None and not _shim.in_process()


@contextlib.contextmanager
def routed(tag, pools):
    """Routes this thread's allocations on every device with a pool of the tag to it (no-op when
    ``pools`` is None). The region tags the thread's allocations on every device, so the tag's pools
    take them there: a segment of the tag in a device's shared pool would also hold other tensors,
    which a pause would take with it."""
    if pools is None:
        yield
        return
    torch = sys.modules["torch"]
    unrouted = [device for device in range(torch.cuda.device_count()) if device not in pools]
    with contextlib.ExitStack() as stack:
        for device, pool in pools.items():
            stack.enter_context(torch.cuda.use_mem_pool(pool, device=device))
        yield
    warn_unrouted(tag, unrouted)


def enter_region(tag, pools):
    """Counts a region of a tag with pools, refusing it while the tag is paused: its pools may hold
    cached blocks, given back by the pause, which PyTorch would hand out without asking vmmkit."""
    if not pools:
        return
    with _lock:
        if tag in _paused:
            raise VmmkitError("region(%r): the tag is paused; PyTorch would hand out its cached blocks, whose "
                              "memory is given back: resume it first" % tag, _shim.MEMORY_ALLOCATION)
        _open[tag] = _open.get(tag, 0) + 1


def leave_region(tag, pools):
    if not pools:
        return
    with _lock:
        _open[tag] -= 1


def mark_paused(tag):
    """Marks the tag (every tag with pools when None) paused, before its pause is called: a pause that
    fails partway may have given some of the memory back. Refuses the pause while a region of such
    a tag is open on any thread: PyTorch could hand out the tag's cached blocks in it afterwards.
    The check and the mark share the lock with :func:`enter_region`, so a region and a pause of one
    tag never overlap. Returns the tags newly marked."""
    with _lock:
        tags = [t for t in (_pools if tag is None else (tag,)) if t in _pools]
        busy = sorted(t for t in tags if _open.get(t))
        if busy:
            raise VmmkitError("pause(%s): a region of %s is open, on this thread or another; PyTorch could hand "
                              "out the tag's cached blocks in it after the pause: pause once the region has ended"
                              % ("" if tag is None else repr(tag), ", ".join(repr(t) for t in busy)),
                              _shim.NOT_PERMITTED)
        marked = {t for t in tags if t not in _paused}
        _paused.update(marked)
        return marked


def unmark_paused(marked):
    """Takes the marks of a pause that was refused with nothing done off again."""
    with _lock:
        _paused.difference_update(marked)


def mark_resumed(tag):
    with _lock:
        if tag is None:
            _paused.clear()
        else:
            _paused.discard(tag)


def _has_mem_pools(torch):
    return hasattr(torch.cuda, "MemPool") and hasattr(torch.cuda, "use_mem_pool")


def tag_pools(tag):
    """The tag's MemPools by device when PyTorch's caching allocator sits between the program and
    vmmkit, else None. Under ``vmmkit run``: one pool on every device, whose segments PyTorch gets
    from the shim. With :func:`use_for_tags`: a pool per device whose segments vmmkit allocates
    (PyTorch gives a pool's allocator to the device current when the pool was made only), for the
    current device and each device with a CUDA context; making a context on a device the program
    does not use would cost it device memory (:func:`warn_unrouted` covers the rest)."""
    torch = sys.modules.get("torch")
    if torch is None or _pluggable or not _has_mem_pools(torch):
        return None
    if _tag_allocator is None and not _shim.preloaded():
        return None  # loaded as the pluggable allocator by the program itself: no caching in between
    count = torch.cuda.device_count()
    with _lock:
        pools = _pools.setdefault(tag, {})
        if _tag_allocator is None:
            if not pools:
                shared = torch.cuda.MemPool()
                pools.update((device, shared) for device in range(count))
        else:
            current = torch.cuda.current_device()
            has_context = getattr(torch._C, "_cuda_hasPrimaryContext", lambda device: False)
            for device in range(count):
                if device not in pools and (device == current or has_context(device)):
                    with torch.cuda.device(device):
                        pools[device] = torch.cuda.MemPool(allocator=_tag_allocator.allocator())
        return dict(pools)  # a copy: another thread's region may add a device meanwhile


def warn_unrouted(tag, devices):
    """Warns when a device that had no CUDA context as the region began (so no pool of the tag) has
    one now: tensors the region made there are PyTorch's own, untagged."""
    torch = sys.modules["torch"]
    has_context = getattr(torch._C, "_cuda_hasPrimaryContext", lambda device: False)
    late = [device for device in devices if has_context(device)]
    if late:
        warnings.warn("vmmkit.region(%r): %s had no CUDA context when the region began, so tensors made there "
                      "in it are PyTorch's own, not the tag's; use the device before the region (for example "
                      "torch.cuda.set_device, or any tensor on it)" % (tag, ", ".join("cuda:%d" % d for d in late)),
                      RuntimeWarning, stacklevel=2)


def release_torch_pool(tag):
    """Drops the PyTorch pool of ``tag`` (under ``vmmkit run`` and with :func:`use_for_tags`), so
    that once its tensors are gone ``torch.cuda.empty_cache()`` gives its cached segments back.
    No-op when the tag has none."""
    with _lock:
        _pools.pop(tag, None)
        _paused.discard(tag)


def refuse_during_capture(what, tag):
    """Refuses a pause or resume while this thread's current PyTorch stream captures a CUDA graph.
    Loaded by PyTorch, vmmkit sees no capture unless the program tells it (``vmmkit_capture_begin``;
    ``CUDAGraph``'s captures are told for it where it serves the tags only, :func:`_tell_captures`,
    and refused where it is the whole allocator, :func:`_refuse_captures`), so PyTorch is asked as
    well; under ``vmmkit run`` the shim sees every capture itself."""
    torch = sys.modules.get("torch")
    try:
        capturing = torch is not None and torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing()
    except Exception:  # a PyTorch without CUDA: nothing captures
        capturing = False
    if capturing:
        _shim.check(_shim.STREAM_CAPTURE_UNSUPPORTED, what, tag)


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
    with _lock:
        if _tag_allocator is not None:
            return _tag_allocator
    if _pluggable or _shim.preloaded():
        return None
    if not _has_mem_pools(torch):
        raise VmmkitError("this PyTorch has no torch.cuda.MemPool with an allocator (2.6 or later has): run the "
                          "program under `vmmkit run`, or use vmmkit.use_as_torch_allocator()", _shim.NOT_SUPPORTED)
    # Read when vmmkit starts, on the shim's load: the rest of the program's memory is PyTorch's own
    # by design, so vmmkit says nothing at exit about memory it did not serve.
    os.environ.setdefault("VMM_SERVES", "tags")
    allocator = _pluggable_allocator(torch, path)
    with _lock:
        _tag_allocator = allocator
    _tell_captures(torch.cuda.graphs.CUDAGraph)
    return allocator


def _pluggable_allocator(torch, path):
    """The shim as a PyTorch pluggable allocator (PyTorch opens it with dlopen); ``path`` as for
    :func:`use_as_torch_allocator`."""
    shim = path or _shim.loaded_shim_path() or _shim.checkout_shim_path()
    if not os.path.exists(shim):
        raise VmmkitError("no vmmkit shim at %s: build it first (./mvnw -DskipTests package)" % shim, _shim.NOT_SUPPORTED)
    return torch.cuda.memory.CUDAPluggableAllocator(shim, "vmmkit_torch_alloc", "vmmkit_torch_free")


def _tell_captures(graph_class):
    """Makes ``graph_class``'s captures tell vmmkit when they begin and end (vmmkit_capture_begin /
    _end), so that a pause or resume on any other thread is refused while one is under way: the
    shim, loaded by PyTorch, sees no capture call, and a pause's device synchronisation would
    invalidate the capture. Captures made through the runtime directly are the program's to tell."""
    if getattr(graph_class.capture_begin, "_vmmkit_tells", False):
        return
    begin, end = graph_class.capture_begin, graph_class.capture_end

    def told_end(graph):
        if getattr(graph, "_vmmkit_told", False):
            graph._vmmkit_told = False
            _shim.library().vmmkit_capture_end()

    def capture_begin(graph, *args, **kwargs):
        # Not told only when vmmkit serves nothing (it did not start): then no pause can run either.
        graph._vmmkit_told = _shim.library().vmmkit_capture_begin() == _shim.SUCCESS
        try:
            return begin(graph, *args, **kwargs)
        except BaseException:
            told_end(graph)  # no capture began
            raise

    def capture_end(graph, *args, **kwargs):
        try:
            return end(graph, *args, **kwargs)
        finally:
            told_end(graph)

    capture_begin._vmmkit_tells = True
    graph_class.capture_begin = capture_begin
    graph_class.capture_end = capture_end


def use_as_torch_allocator(path=None):
    """Makes vmmkit PyTorch's CUDA allocator (before the first CUDA allocation).

    CUDA graph capture (``torch.cuda.graph``, ``torch.cuda.CUDAGraph``) then raises ``VmmkitError``
    (801) before anything is captured: PyTorch keeps a graph's memory only in its own caching
    allocator. A program that captures CUDA graphs runs under ``vmmkit run``, or lets vmmkit serve
    its tagged tensors only (:func:`use_for_tags`).

    ``path``: the shim; by default the one loaded in this process, else ``VMMKIT_SHIM``, else this
    checkout's ``target/native/libvmmkit_preload.so``.
    """
    global _pluggable
    import torch
    allocator = _pluggable_allocator(torch, path)
    torch.cuda.memory.change_current_allocator(allocator)
    _pluggable = True
    _refuse_captures(torch.cuda.graphs.CUDAGraph)
    return allocator


def _refuse_captures(graph_class):
    """Makes ``graph_class`` refuse to be made, and ``capture_begin`` to run, before anything is
    captured (refused at construction, ``torch.cuda.graph`` has not yet made its stream current).
    A graph replays at the addresses its capture used, so the memory allocated during a capture
    must stay the graph's while it lives: PyTorch's caching allocator keeps it in the graph's
    private pool, but has no such call for a pluggable allocator set from Python, so with vmmkit as
    the pluggable allocator a replay would write into memory handed out again since."""
    if getattr(graph_class.capture_begin, "_vmmkit_refuses", False):
        return

    def refuse(graph, *args, **kwargs):
        raise VmmkitError("CUDA graph capture is not supported with vmmkit as PyTorch's pluggable allocator: "
                          "a replay would write into memory allocated during the capture and handed out again "
                          "since. Run the program under `vmmkit run` instead, where PyTorch's caching allocator "
                          "keeps each graph's memory and vmmkit serves its segments, or let vmmkit serve the "
                          "tagged tensors only (vmmkit.use_for_tags(), in place of use_as_torch_allocator)",
                          _shim.NOT_SUPPORTED)

    refuse._vmmkit_refuses = True
    graph_class.__init__ = refuse
    graph_class.capture_begin = refuse
