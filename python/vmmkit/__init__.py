"""Memory tags of vmmkit for Python programs: pause a group of tensors' GPU memory and resume it at
the same addresses.

Works three ways. Under ``vmmkit run`` the shim is preloaded and PyTorch's caching allocator gets
all its segments from it. With :func:`use_as_torch_allocator` vmmkit is PyTorch's whole allocator.
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
                                # (not with use_as_torch_allocator, which says why)

Under ``vmmkit run`` and with :func:`use_for_tags` PyTorch caches the memory it gets: a tag's
tensors then come from a ``torch.cuda.MemPool`` of their own, on every device, so that its segments
hold the tag's tensors only (and cached blocks of the tag are paused with it); while the tag is
paused, a region of it is refused, since PyTorch would hand out those blocks. With
:func:`use_as_torch_allocator` every tensor is an allocation of its own and no pool is needed.
"""

import contextlib
import ctypes
import os
import sys
import threading
import warnings

__all__ = ["region", "pause", "resume", "use_for_tags", "use_as_torch_allocator", "release_torch_pool", "library",
           "VmmkitError"]

_SHIM = "libvmmkit_preload.so"
_SUCCESS, _INVALID_VALUE, _MEMORY_ALLOCATION, _NOT_SUPPORTED, _STREAM_CAPTURE_UNSUPPORTED = 0, 1, 2, 801, 900

_lock = threading.Lock()
_library = None
_pluggable = False      # vmmkit is PyTorch's whole allocator (use_as_torch_allocator)
_tag_allocator = None   # vmmkit serves the tags' pools only (use_for_tags): their allocator
_pools = {}             # tag -> {device: torch.cuda.MemPool}
_paused = set()         # tags with pools, paused through this module


class VmmkitError(RuntimeError):
    """A vmmkit call failed; ``code`` is the CUDA runtime error it returned."""

    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


def _loaded_shim_path():
    """The path of the shim if this process has it loaded (preloaded or opened by PyTorch)."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip("\n").split(None, 5)[-1]
                if path.endswith("/" + _SHIM):
                    return path
    except OSError:
        pass
    return None


def _checkout_shim_path():
    """The shim built in this source checkout (target/native), or the one VMMKIT_SHIM names."""
    named = os.environ.get("VMMKIT_SHIM")
    if named:
        return named
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.path.join(root, "target", "native", _SHIM)


def library():
    """The shim's functions (ctypes), loaded once. Raises VmmkitError when vmmkit is not in this process."""
    global _library
    with _lock:
        if _library is not None:
            return _library
        path = _loaded_shim_path()
        if path is None:
            raise VmmkitError("vmmkit is not loaded in this process: run the program under `vmmkit run`, "
                              "call vmmkit.use_as_torch_allocator() before the first CUDA allocation, or open "
                              "a vmmkit.region() with PyTorch imported (vmmkit then serves the tagged tensors)",
                              _NOT_SUPPORTED)
        lib = ctypes.CDLL(path)  # the library already loaded: the same instance, same state
        for name, argtypes in (("vmmkit_region_begin", [ctypes.c_char_p, ctypes.c_int]),
                               ("vmmkit_region_end", []),
                               ("vmmkit_pause", [ctypes.c_char_p]),
                               ("vmmkit_resume", [ctypes.c_char_p]),
                               ("vmmkit_host_memory", [ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]),
                               ("vmmkit_capture_begin", []),
                               ("vmmkit_capture_end", [])):
            fn = getattr(lib, name)
            fn.argtypes = argtypes
            fn.restype = ctypes.c_int
        _library = lib
        return lib


def _check(code, what, tag):
    if code == _SUCCESS:
        return
    where = what + ("" if tag is None else "(%r)" % tag)
    if code == _INVALID_VALUE:
        raise VmmkitError(where + ": invalid value (an unknown tag, an empty or too long name, "
                          "or region_end with no region open)", code)
    if code == _MEMORY_ALLOCATION:
        raise VmmkitError(where + ": out of device memory; the tag is consistent, call it again "
                          "once memory was given back", code)
    if code == _NOT_SUPPORTED:
        raise VmmkitError(where + ": vmmkit serves no allocations in this process (monitor mode?)", code)
    if code == _STREAM_CAPTURE_UNSUPPORTED:
        raise VmmkitError(where + ": refused while a CUDA graph is being captured (devices reached before "
                          "the refusal are done); call it again once the capture has ended", code)
    raise VmmkitError(where + ": failed with CUDA error %d (vmmkit said why on stderr); the tag is "
                      "consistent, call it again" % code, code)


def _encode(tag):
    if tag is None:
        return None
    if not isinstance(tag, str) or not tag:
        raise ValueError("a tag is a non-empty string")
    return tag.encode("utf-8")


def _has_mem_pools(torch):
    return hasattr(torch.cuda, "MemPool") and hasattr(torch.cuda, "use_mem_pool")


def _torch_pools(tag):
    """The tag's MemPools by device when PyTorch's caching allocator sits between the program and
    vmmkit, else None. Under ``vmmkit run``: one pool on every device, whose segments PyTorch gets
    from the shim. With :func:`use_for_tags`: a pool per device whose segments vmmkit allocates
    (PyTorch gives a pool's allocator to the device current when the pool was made only), for the
    current device and each device with a CUDA context; making a context on a device the program
    does not use would cost it device memory (:func:`_warn_unrouted` covers the rest)."""
    torch = sys.modules.get("torch")
    if torch is None or _pluggable or not _has_mem_pools(torch):
        return None
    if _tag_allocator is None and _SHIM not in os.environ.get("LD_PRELOAD", ""):
        return None  # loaded as the pluggable allocator by the program itself: no caching in between
    count = torch.cuda.device_count()
    with _lock:
        pools = _pools.setdefault(tag, {})
        if _tag_allocator is None:
            if not pools:
                shared = torch.cuda.MemPool()
                pools.update((device, shared) for device in range(count))
            return pools
        current = torch.cuda.current_device()
        has_context = getattr(torch._C, "_cuda_hasPrimaryContext", lambda device: False)
        for device in range(count):
            if device not in pools and (device == current or has_context(device)):
                with torch.cuda.device(device):
                    pools[device] = torch.cuda.MemPool(allocator=_tag_allocator.allocator())
        return pools


def _warn_unrouted(tag, devices):
    """Warns when a device that had no CUDA context as the region began (so no pool of the tag) has
    one now: tensors the region made there are PyTorch's own, untagged."""
    torch = sys.modules["torch"]
    has_context = getattr(torch._C, "_cuda_hasPrimaryContext", lambda device: False)
    late = [device for device in devices if has_context(device)]
    if late:
        warnings.warn("vmmkit.region(%r): %s had no CUDA context when the region began, so tensors made there "
                      "in it are PyTorch's own, not the tag's; use the device before the region (for example "
                      "torch.cuda.set_device, or any tensor on it)" % (tag, ", ".join("cuda:%d" % d for d in late)),
                      RuntimeWarning, stacklevel=3)


def _refuse_paused(tag, pools):
    """A paused tag's pool may hold cached blocks, unmapped while it is paused, which PyTorch would
    hand out without asking vmmkit: a region of it is refused until it is resumed."""
    if pools and tag in _paused:
        raise VmmkitError("region(%r): the tag is paused; PyTorch would hand out its cached blocks, whose "
                          "memory is given back: resume it first" % tag, _MEMORY_ALLOCATION)


@contextlib.contextmanager
def region(tag, keep_contents=False):
    """Allocations made in this block by this thread carry ``tag``, on every device.

    ``keep_contents``: a pause copies the tag's bytes to pinned host memory and a resume brings them
    back; otherwise their contents after a resume are undefined. The setting is the tag's, shared by
    all its allocations (the latest region opened sets it). Regions nest.
    """
    name = _encode(tag)
    if _library is None and _loaded_shim_path() is None and sys.modules.get("torch") is not None:
        use_for_tags()
    lib = library()
    pools = _torch_pools(tag)
    _refuse_paused(tag, pools)
    _check(lib.vmmkit_region_begin(name, 1 if keep_contents else 0), "region_begin", tag)
    try:
        if pools is None:
            yield
        else:
            # The region tags this thread's allocations on every device, so the tag's pools take
            # them on every device: a segment of the tag in a device's shared pool would also hold
            # other tensors, which a pause would take with it.
            torch = sys.modules["torch"]
            unrouted = [device for device in range(torch.cuda.device_count()) if device not in pools]
            with contextlib.ExitStack() as routed:
                for device, pool in pools.items():
                    routed.enter_context(torch.cuda.use_mem_pool(pool, device=device))
                yield
            _warn_unrouted(tag, unrouted)
    finally:
        _check(lib.vmmkit_region_end(), "region_end", None)


def release_torch_pool(tag):
    """Drops the PyTorch pool of ``tag`` (under ``vmmkit run`` and with :func:`use_for_tags`), so
    that once its tensors are gone ``torch.cuda.empty_cache()`` gives its cached segments back.
    No-op when the tag has none."""
    with _lock:
        _pools.pop(tag, None)
        _paused.discard(tag)


def _refuse_during_torch_capture(what, tag):
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
        _check(_STREAM_CAPTURE_UNSUPPORTED, what, tag)


def pause(tag=None):
    """Gives the tag's GPU memory back to the driver, keeping its addresses (every tag when None).

    Waits for the device's queued work first. While paused, freeing the tag's tensors works and a
    new allocation into the tag fails. Refused (``VmmkitError``, code 900) while a CUDA graph is
    being captured (include/vmmkit/vmmkit.h says why): any capture under ``vmmkit run``; with the
    pluggable allocator (where ``torch.cuda.graph`` is refused), a capture the program told vmmkit
    of (``vmmkit_capture_begin``) on any thread, or any capture on this thread's current PyTorch
    stream.
    """
    _refuse_during_torch_capture("pause", tag)
    name, lib = _encode(tag), library()
    # Marked before the call: a pause that fails partway may have given some of the memory back.
    with _lock:
        marked = {t for t in (_pools if tag is None else (tag,)) if t in _pools and t not in _paused}
        _paused.update(marked)
    code = lib.vmmkit_pause(name)
    if code in (_INVALID_VALUE, _NOT_SUPPORTED, _STREAM_CAPTURE_UNSUPPORTED):  # refused, nothing done
        with _lock:
            _paused.difference_update(marked)
    _check(code, "pause", tag)


def resume(tag=None):
    """Brings the tag's GPU memory back at the same addresses (every tag when None); refused, as
    ``pause`` is, while a CUDA graph is being captured."""
    _refuse_during_torch_capture("resume", tag)
    _check(library().vmmkit_resume(_encode(tag)), "resume", tag)
    with _lock:
        if tag is None:
            _paused.clear()
        else:
            _paused.discard(tag)


def host_memory():
    """(pinned, ready): the pinned host memory vmmkit holds for tags, and the part of it ready for
    the next pause. While a tag that keeps its contents is allocated, vmmkit pins host memory for
    its first pause in the background (``VMM_PIN_AHEAD``): once ``ready`` covers the tag, the
    first pause copies at the bus's speed."""
    pinned, ready = ctypes.c_size_t(0), ctypes.c_size_t(0)
    _check(library().vmmkit_host_memory(ctypes.byref(pinned), ctypes.byref(ready)), "host_memory", None)
    return pinned.value, ready.value


def use_for_tags(path=None):
    """Makes vmmkit serve the tagged tensors only, in a program that is not run under ``vmmkit run``.

    Each tag's tensors come from memory pools of its own (``torch.cuda.MemPool``, one per device
    with a CUDA context) whose allocator is vmmkit (the shim, which PyTorch opens as a pluggable
    allocator); every other tensor stays with PyTorch's own allocator, and so do CUDA graphs'
    memory pools, so graphs captured over tagged tensors replay after a pause and resume. The first :func:`region` calls this when vmmkit is not in the process
    yet and PyTorch is imported; calling it first only chooses ``path``. No-op under ``vmmkit run``
    or after :func:`use_as_torch_allocator`. Returns the pools' allocator (or None when no-op).

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
    if _pluggable or _SHIM in os.environ.get("LD_PRELOAD", ""):
        return None
    if not _has_mem_pools(torch):
        raise VmmkitError("this PyTorch has no torch.cuda.MemPool with an allocator (2.6 or later has): run the "
                          "program under `vmmkit run`, or use vmmkit.use_as_torch_allocator()", _NOT_SUPPORTED)
    shim = path or _loaded_shim_path() or _checkout_shim_path()
    if not os.path.exists(shim):
        raise VmmkitError("no vmmkit shim at %s: build it first (./mvnw -DskipTests package)" % shim, _NOT_SUPPORTED)
    # Read when vmmkit starts, on the shim's load: the rest of the program's memory is PyTorch's own
    # by design, so vmmkit says nothing at exit about memory it did not serve.
    os.environ.setdefault("VMM_SERVES", "tags")
    allocator = torch.cuda.memory.CUDAPluggableAllocator(shim, "vmmkit_torch_alloc", "vmmkit_torch_free")
    with _lock:
        _tag_allocator = allocator
    _tell_captures(torch.cuda.graphs.CUDAGraph)
    return allocator


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
            library().vmmkit_capture_end()

    def capture_begin(graph, *args, **kwargs):
        # Not told only when vmmkit serves nothing (it did not start): then no pause can run either.
        graph._vmmkit_told = library().vmmkit_capture_begin() == _SUCCESS
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
    shim = path or _loaded_shim_path() or _checkout_shim_path()
    if not os.path.exists(shim):
        raise VmmkitError("no vmmkit shim at %s: build it first (./mvnw -DskipTests package)" % shim, _NOT_SUPPORTED)
    allocator = torch.cuda.memory.CUDAPluggableAllocator(shim, "vmmkit_torch_alloc", "vmmkit_torch_free")
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
                          _NOT_SUPPORTED)

    refuse._vmmkit_refuses = True
    graph_class.__init__ = refuse
    graph_class.capture_begin = refuse
