"""CUDA graph captures where PyTorch loaded the shim, which then sees no capture call: a pause's
device synchronisation beside one would invalidate it. vmmkit is told of ``CUDAGraph``'s captures
where it serves the tags only, refuses them where it is PyTorch's whole allocator, and PyTorch is
asked whether the calling thread's stream captures."""

import sys

from . import _shim
from ._shim import VmmkitError


def refuse_during_capture(what, tag):
    """Refuses a pause or resume while this thread's current PyTorch stream captures a CUDA graph.
    Loaded by PyTorch, vmmkit sees no capture unless the program tells it (``vmmkit_capture_begin``;
    ``CUDAGraph``'s captures are told for it where it serves the tags only, :func:`tell_captures`,
    and refused where it is the whole allocator, :func:`refuse_captures`), so PyTorch is asked as
    well; under ``vmmkit run`` the shim sees every capture itself."""
    torch = sys.modules.get("torch")
    try:
        capturing = torch is not None and torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing()
    except Exception:  # a PyTorch without CUDA: nothing captures
        capturing = False
    if capturing:
        _shim.check(_shim.STREAM_CAPTURE_UNSUPPORTED, what, tag)


def tell_captures(graph_class):
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


def refuse_captures(graph_class):
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
