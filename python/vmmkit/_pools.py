"""The tags' memory pools where PyTorch's caching allocator sits between a program and vmmkit (under
``vmmkit run``, and where vmmkit serves the tags only), the pools the tags' CUDA graphs capture
into, and the rule that a region (or a capture) and a pause of one tag never overlap: PyTorch hands
out a pool's cached blocks without asking vmmkit."""

import contextlib
import sys
import threading
import warnings
import weakref

from . import _shim, _torch
from ._shim import VmmkitError

_lock = threading.Lock()
_pools = {}             # tag -> {device: torch.cuda.MemPool}
_graph_pools = {}       # tag of CUDA graphs -> {(device, pool id): torch.cuda.MemPool} they capture into
                        # (use_for_tags; weak: a pool lives while its graphs do)
_paused = set()         # tags with pools, paused through this module
_open = {}              # tag with pools -> its regions and captures open now, on any thread
_untagged = {}          # device -> the MemPool of untagged regions (where PyTorch caches in between)


def _cached_tags():
    """The tags whose blocks PyTorch may cache: those with pools, and those graphs captured into."""
    return _pools.keys() | _graph_pools.keys()


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


def enter_region(tag, cached):
    """Counts a region (or a graph's capture) of a tag whose blocks PyTorch caches (``cached``),
    refusing it while the tag is paused: its pools may hold cached blocks, given back by the pause,
    which PyTorch would hand out without asking vmmkit."""
    if not cached:
        return
    with _lock:
        if tag in _paused:
            raise VmmkitError("region or capture of %r: the tag is paused; PyTorch would hand out its cached "
                              "blocks, whose memory is given back: resume it first" % tag, _shim.MEMORY_ALLOCATION)
        _open[tag] = _open.get(tag, 0) + 1


def leave_region(tag, cached):
    if not cached:
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
        cached = _cached_tags()
        tags = [t for t in (cached if tag is None else (tag,)) if t in cached]
        busy = sorted(t for t in tags if _open.get(t))
        if busy:
            raise VmmkitError("pause(%s): a region or capture of %s is open, on this thread or another; PyTorch "
                              "could hand out the tag's cached blocks in it after the pause: pause once it has ended"
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


def tag_pools(tag):
    """The tag's MemPools by device when PyTorch's caching allocator sits between the program and
    vmmkit, else None. Under ``vmmkit run``: one pool on every device, whose segments PyTorch gets
    from the shim. With ``use_for_tags``: a pool per device whose segments vmmkit allocates
    (PyTorch gives a pool's allocator to the device current when the pool was made only), for the
    current device and each device with a CUDA context; making a context on a device the program
    does not use would cost it device memory (:func:`warn_unrouted` covers the rest)."""
    torch = sys.modules.get("torch")
    if torch is None or _torch.serves_all() or not _torch.has_mem_pools(torch):
        return None
    allocator = _torch.tag_allocator()
    if allocator is None and not _shim.preloaded():
        return None  # loaded as the pluggable allocator by the program itself: no caching in between
    count = torch.cuda.device_count()
    with _lock:
        pools = _pools.setdefault(tag, {})
        if allocator is None:
            if not pools:
                shared = torch.cuda.MemPool()
                pools.update((device, shared) for device in range(count))
        else:
            current = torch.cuda.current_device()
            has_context = getattr(torch._C, "_cuda_hasPrimaryContext", lambda device: False)
            for device in range(count):
                if device not in pools and (device == current or has_context(device)):
                    with torch.cuda.device(device):
                        pools[device] = torch.cuda.MemPool(allocator=allocator.allocator())
        return dict(pools)  # a copy: another thread's region may add a device meanwhile


def untagged_pools():
    """The MemPools by device that untagged regions route to where PyTorch's caching allocator sits
    between the program and vmmkit, else None: one plain pool shared by every device, so that blocks
    of the default tag's segments (PyTorch's default pool) or of a tag's pool are not handed out
    there. Under ``vmmkit run`` its segments come from the shim inside the untagged region; where
    vmmkit serves the tags only they are PyTorch's own, as untagged tensors are."""
    torch = sys.modules.get("torch")
    if torch is None or _torch.serves_all() or not _torch.has_mem_pools(torch):
        return None
    if _torch.tag_allocator() is None and not _shim.preloaded():
        return None
    with _lock:
        if not _untagged:
            shared = torch.cuda.MemPool()
            _untagged.update((device, shared) for device in range(torch.cuda.device_count()))
        return dict(_untagged)


def graph_pool(tag, graph, pool):
    """The pool ``graph`` of ``tag`` captures into, on the current device, so that its memory
    carries the tag. Where vmmkit serves the tags only: a MemPool whose allocator is vmmkit, new
    for the graph, or, as ``torch.cuda.graph`` shares pools, the one ``pool`` names, which must be
    another graph's of the tag on this device (``graph.pool()``); any other pool's segments would
    be PyTorch's own. It is the graph's alone (eager tensors of the tag use the tag's other pools,
    since a block a graph freed during its capture is still written by its replays) and lives as
    long as the graphs that use it. Under ``vmmkit run``: ``pool`` as given (None: a private pool
    of the graph's own), whose segments PyTorch gets from cudaMalloc while the capturing thread is
    in the tag's region. Either way the tag counts as one whose blocks PyTorch caches, for
    :func:`enter_region` and :func:`mark_paused`."""
    torch = sys.modules["torch"]
    allocator = _torch.tag_allocator()
    if allocator is None and not _shim.preloaded():
        raise VmmkitError("cuda_graph(%r): vmmkit serves none of PyTorch's memory in this process (the shim was "
                          "loaded by the program, not by PyTorch or `vmmkit run`)" % tag, _shim.NOT_SUPPORTED)
    with _lock:
        by_id = _graph_pools.setdefault(tag, weakref.WeakValueDictionary())
        if allocator is None:
            return pool
        device = torch.cuda.current_device()
        if pool is None:
            mem_pool = torch.cuda.MemPool(allocator=allocator.allocator())
            by_id[(device, mem_pool.id)] = mem_pool
        else:
            mem_pool = by_id.get((device, tuple(pool)))
            if mem_pool is None:
                raise VmmkitError("cuda_graph(%r, pool=%r): where vmmkit serves the tags only, a graph shares only "
                                  "the pool of another graph of the tag on this device (its .pool()); another "
                                  "pool's segments would be PyTorch's own" % (tag, pool), _shim.INVALID_VALUE)
    graph.__dict__.setdefault("_vmmkit_pools", []).append(mem_pool)  # the pool lives while its graphs do
    return mem_pool.id


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
    """Drops the PyTorch pools of ``tag`` (under ``vmmkit run`` and with ``use_for_tags``; its
    graphs' pools too), so that once its tensors and graphs are gone ``torch.cuda.empty_cache()``
    gives its cached segments back. No-op when the tag has none."""
    with _lock:
        _pools.pop(tag, None)
        _graph_pools.pop(tag, None)
        _paused.discard(tag)
