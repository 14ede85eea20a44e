"""CUDA graph captures where PyTorch loaded the shim, which then sees no capture call: a pause's
device synchronisation beside one would invalidate it, and where vmmkit is PyTorch's whole allocator
the capture's allocations must be the graph's own. So ``CUDAGraph``'s captures tell vmmkit when
they begin and end, and PyTorch is asked whether the calling thread's stream captures."""

import sys

from . import _shim


def refuse_during_capture(what, tag):
    """Refuses a pause or resume while this thread's current PyTorch stream captures a CUDA graph.
    Loaded by PyTorch, vmmkit sees no capture unless the program tells it (``vmmkit_capture_begin``;
    ``CUDAGraph``'s captures are told for it, :func:`tell_captures`), so PyTorch is asked as well;
    under ``vmmkit run`` the shim sees every capture itself."""
    torch = sys.modules.get("torch")
    try:
        capturing = torch is not None and torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing()
    except Exception:  # a PyTorch without CUDA: nothing captures
        capturing = False
    if capturing:
        _shim.check(_shim.STREAM_CAPTURE_UNSUPPORTED, what, tag)


def tell_captures(graph_class):
    """Makes ``graph_class``'s captures tell vmmkit when they begin and end (vmmkit_capture_begin /
    _end). The shim, loaded by PyTorch, sees no capture call, and while a capture is told:
    - a pause or resume on any thread is refused, since its device synchronisation would
      invalidate the capture;
    - where vmmkit is PyTorch's whole allocator, an allocation or free on a capturing stream is
      left to CUDA and becomes the graph's own node. A graph replays at the addresses its capture
      used, and PyTorch tells a pluggable allocator nothing of the graph's private pool, so
      vmmkit could otherwise hand that memory out again while replays still write it. CUDA keeps
      it the graph's while the graph lives, as with PyTorch's own cudaMallocAsync backend
      (PyTorch instantiates its graphs to free such memory on their next launch).
    Captures made through the runtime directly are the program's to tell."""
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

