"""CUDA graph captures beside a pause, with vmmkit as PyTorch's pluggable allocator (the shim opened
by PyTorch, not preloaded, so it sees no capture call itself).

  python3 pluggable_capture.py native   # no vmmkit: torch.cuda.graph; a capture made through the
                                        # runtime (in-place kernels, nothing allocated) alone, then
                                        # with a device synchronisation from another thread during it
  python3 pluggable_capture.py graph    # torch.cuda.graph alone, replayed twice: with
                                        # PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync its
                                        # allocations are stream-ordered, and under `vmmkit run` the
                                        # capture's must stay CUDA's (the graph's own nodes)
  python3 pluggable_capture.py vmmkit   # vmmkit as PyTorch's whole allocator: the torch.cuda.graph
                                        # checks of `tags` (the capture's memory is CUDA's, the
                                        # graph's own nodes); then a runtime capture, told to vmmkit
                                        # (vmmkit_capture_begin / _end), with vmmkit.pause() from
                                        # another thread during it: refused (900), the graph
                                        # launches; then pause, resume, launch again
  python3 pluggable_capture.py tags     # vmmkit serving the tags only (the first region, no
                                        # `vmmkit run`): torch.cuda.graph replays, twice, and a
                                        # tensor allocated after a capture is unchanged by a replay;
                                        # one on a thread of its own, with vmmkit.pause() from this
                                        # thread during it: refused (900, CUDAGraph told vmmkit), the
                                        # graph replays; then pause, resume, replay again
  python3 pluggable_capture.py tagged-graph   # vmmkit.cuda_graph (the graph's memory in a tag), with
                                        # vmmkit serving the tags only, or under `vmmkit run` when
                                        # run there: a replay as eager; a pause of the tag gives at
                                        # least the graph's two 256 MiB blocks back; after a resume
                                        # the replay is bit-identical. With TAGGED_GRAPH_WHOLE=1, as
                                        # PyTorch's whole allocator: cuda_graph must be refused (801)
(native also runs torch.cuda.graph on a thread of its own with a synchronisation from this thread
during it: what the pause would do untold.)

Prints one line per check, "capture <name> ...", and exits 1 if a check the mode must pass fails.
"""
import ctypes
import gc
import sys
import threading

import torch

N = 64 << 20  # floats: 256 MiB per tensor


def runtime():
    """The CUDA runtime PyTorch loaded (ctypes), for the capture calls PyTorch does not expose."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "/libcudart.so" in path:
                lib = ctypes.CDLL(path)
                break
        else:
            lib = ctypes.CDLL("libcudart.so")
    for name in ("cudaStreamBeginCapture", "cudaStreamEndCapture", "cudaGraphInstantiate", "cudaGraphLaunch"):
        getattr(lib, name).restype = ctypes.c_int
    lib.cudaStreamBeginCapture.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.cudaStreamEndCapture.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.cudaGraphInstantiate.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_ulonglong]
    lib.cudaGraphLaunch.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    return lib


def body(out, x, w):
    """In-place kernels only: nothing is allocated while they are captured."""
    out.copy_(x)
    out.mul_(w)
    out.add_(w)
    out.relu_()


def beside_a_capture(capture, beside):
    """Runs capture(recorded) on a thread of its own; the capture calls recorded() once it has
    recorded its kernels, and recorded() runs beside() on this thread before the capture goes on.
    Returns (what capture returned, its exception or None, beside()'s result or exception)."""
    began, done, got = threading.Event(), threading.Event(), {}

    def recorded():
        got["capturing"] = True
        began.set()
        done.wait()

    def run():
        try:
            got["value"] = capture(recorded)
        except BaseException as e:
            got["error"] = e.with_traceback(None)  # no frame kept alive (see capture_beside)
        finally:
            began.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    began.wait()
    result = "not run"
    if got.get("capturing"):
        try:
            result = beside()
        except BaseException as e:
            result = e.with_traceback(None)
    done.set()
    thread.join()
    return got.get("value"), got.get("error"), result


def capture_beside(rt, out, x, w, beside, tell=None):
    """Captures body() through the runtime on a thread of its own (global mode), told to vmmkit
    when ``tell`` is its library; once the capture has recorded it, runs beside() on this thread.
    Returns (the launchable graph or None, the capture's result code, beside()'s result)."""
    stream = torch.cuda.Stream()

    def capture(recorded):
        with torch.cuda.stream(stream):
            body(out, x, w)  # warm-up outside the capture
        torch.cuda.synchronize()
        # As torch.cuda.graph does before its capture: a collection during the capture could
        # destroy a CUDA graph left in a reference cycle, and a graph's destruction beside a
        # global-mode capture invalidates it (seen: 901 whenever the collector ran there).
        gc.collect()
        if tell is not None:
            assert tell.vmmkit_capture_begin() == 0
        handle = ctypes.c_void_p(stream.cuda_stream)
        assert rt.cudaStreamBeginCapture(handle, 0) == 0
        with torch.cuda.stream(stream):
            body(out, x, w)
        recorded()
        graph = ctypes.c_void_p()
        rc = rt.cudaStreamEndCapture(handle, ctypes.byref(graph))
        if tell is not None:
            tell.vmmkit_capture_end()
        if rc != 0:
            return None, rc
        launchable = ctypes.c_void_p()
        assert rt.cudaGraphInstantiate(ctypes.byref(launchable), graph, 0) == 0
        return (launchable, handle), rc

    value, error, result = beside_a_capture(capture, beside)
    if error is not None:
        raise error
    graph, rc = value
    return graph, rc, result


def graph_beside(out, x, w, beside):
    """torch.cuda.graph of body() on a thread of its own; once the capture has recorded it, runs
    beside() on this thread. Returns (the graph or None, the capture's exception or None, beside()'s
    result or exception)."""
    stream = torch.cuda.Stream()

    def capture(recorded):
        with torch.cuda.stream(stream):
            body(out, x, w)  # warm-up outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            body(out, x, w)
            recorded()
        return graph

    return beside_a_capture(capture, beside)


def replay(graph, out):
    out.zero_()
    torch.cuda.synchronize()
    graph.replay()
    torch.cuda.synchronize()
    return out.clone()


def launch(rt, graph, out):
    out.zero_()
    torch.cuda.synchronize()
    launchable, stream = graph
    assert rt.cudaGraphLaunch(launchable, stream) == 0
    torch.cuda.synchronize()
    return out.clone()


def again_after_pause(vmmkit, run, first, label, verb):
    """Pauses and resumes the kept weights, then runs the graph again; True when the pause gave back
    at least 99 % of the weights' bytes and the output is bit-identical to ``first``."""
    free_before = torch.cuda.mem_get_info()[0]
    vmmkit.pause("weights")
    released = torch.cuda.mem_get_info()[0] - free_before
    vmmkit.resume("weights")
    same = torch.equal(run(), first)
    print("capture %s: released %.2f GiB; %s after resume %s" % (
        label, released / 2 ** 30, verb, "bit-identical" if same else "DIFFERENT"))
    return same and released >= 0.99 * N * 4


def graph_api():
    """torch.cuda.graph over a small matrix product; returns True when its replay matches eager, else
    False or what the capture raised."""
    a = torch.randn(256, 256, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        a @ a
    torch.cuda.synchronize()
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):
            b = a @ a
    except Exception as e:
        return e
    graph.replay()
    torch.cuda.synchronize()
    return torch.allclose(b, a @ a)


def warmed_up_product(n):
    """An n x n matrix and a side stream on which relu(a @ a) has run once (outside any capture,
    so that the libraries' own first allocations are made); returns (a, side)."""
    a = torch.randn(n, n, device="cuda") * 0.01
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.relu(a @ a)
    torch.cuda.synchronize()
    return a, side


def graph_memory_kept():
    """A temporary freed during the capture, then a tensor allocated after it on the capture's
    stream: the graph's replay writes the temporary's memory, so it must not be the new tensor's.
    Returns True when the new tensor came through the replay unchanged."""
    a, side = warmed_up_product(2048)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        t = a @ a
        b = torch.relu(t)
        del t
    with torch.cuda.stream(side):
        z = torch.full_like(a, 7.0)
    torch.cuda.synchronize()
    graph.replay()
    torch.cuda.synchronize()
    return bool((z == 7.0).all()) and torch.allclose(b, torch.relu(a @ a))


def graphs_replay(result, label):
    """A second torch.cuda.graph beside the first (``result``: graph_api()'s), then
    graph_memory_kept(); prints one line and returns True when both graphs replayed as eager and
    the tensor allocated after a capture came through its replay unchanged."""
    second = graph_api()  # a second graph: the first one's memory in use beside it
    kept = graph_memory_kept()
    print("capture %s: %s; a tensor allocated after the capture %s" % (
        label, "replayed as eager, twice" if result is True and second is True else "FAILED: %r %r" % (result, second),
        "unchanged by a replay" if kept else "OVERWRITTEN by a replay"))
    return result is True and second is True and kept


def torch_graph_checks(vmmkit, result, out, x, w, expected):
    """The torch.cuda.graph checks where vmmkit is loaded by PyTorch (``result``: graph_api()'s):
    graphs_replay(); a pause from this thread during a capture on another is refused and the graph
    replays; after a pause and a resume the replay is bit-identical. True when all passed."""
    replayed = graphs_replay(result, "torch-graph")
    graph, error, beside = graph_beside(out, x, w, vmmkit.pause)
    pause_refused = isinstance(beside, vmmkit.VmmkitError) and beside.code == 900
    print("capture torch-graph-beside-pause: pause -> %s" % ("refused (900)" if pause_refused else "%r" % (beside,)))
    first = replay(graph, out) if error is None and graph is not None else None
    ok = pause_refused and first is not None and torch.equal(first, expected)
    print("capture torch-graph-beside-pause: the capture %s; %s" % (
        "ended" if error is None else "failed: %s" % str(error).splitlines()[0][:160],
        "replayed, output as eager's" if ok else "FAILED"))
    return ok and replayed and again_after_pause(vmmkit, lambda: replay(graph, out), first,
                                                 "torch-graph-after-pause", "replay")


def tagged_graph():
    """vmmkit.cuda_graph over a matrix product whose two 256 MiB results (one freed during the
    capture) are the graph's memory, and a second graph sharing its pool: True when the replays
    match eager, a pause of the tag gives at least those 512 MiB back, and the replays after a
    resume are bit-identical."""
    import os
    import vmmkit
    if os.environ.get("TAGGED_GRAPH_WHOLE") == "1":
        vmmkit.use_as_torch_allocator()
    a, side = warmed_up_product(8192)  # 256 MiB, outside any tag
    graph = torch.cuda.CUDAGraph()
    try:
        with vmmkit.cuda_graph(graph, tag="graph", stream=side):
            t = a @ a
            b = torch.relu(t)
            del t
    except vmmkit.VmmkitError as e:
        refused = e.code == 801
        print("capture tagged-graph: cuda_graph %s" % ("refused (801)" if refused else "raised %d: %s" % (e.code, e)))
        return refused and os.environ.get("TAGGED_GRAPH_WHOLE") == "1"
    graph.replay()
    torch.cuda.synchronize()
    first = b.clone()
    as_eager = torch.allclose(first, torch.relu(a @ a))
    shares = torch.cuda.CUDAGraph()  # a second graph sharing the first one's pool, as torch.cuda.graph allows
    with vmmkit.cuda_graph(shares, tag="graph", stream=side, pool=graph.pool()):
        c = torch.relu(a @ a) * 2
    shares.replay()
    torch.cuda.synchronize()
    as_eager = as_eager and torch.allclose(c, first * 2)
    free_before = torch.cuda.mem_get_info()[0]
    vmmkit.pause("graph")
    released = torch.cuda.mem_get_info()[0] - free_before
    vmmkit.resume("graph")
    graph.replay()
    shares.replay()
    torch.cuda.synchronize()
    same = torch.equal(b, first) and torch.equal(c, first * 2)
    print("capture tagged-graph: two graphs sharing a pool, replays %s; the pause released %.3f GiB (the graph's "
          "blocks: 0.5); after a resume the replay %s" % ("as eager" if as_eager else "DIFFERENT from eager",
                                                          released / 2 ** 30, "bit-identical" if same else "DIFFERENT"))
    return as_eager and same and released >= 0.99 * (512 << 20) and os.environ.get("TAGGED_GRAPH_WHOLE") != "1"


def main():
    mode = sys.argv[1]
    if mode == "tagged-graph":
        sys.exit(0 if tagged_graph() else 1)
    if mode == "graph":  # torch.cuda.graph alone, under whatever allocator the environment sets
        result = graph_api()
        sys.exit(0 if graphs_replay(result, "torch-graph " + torch.cuda.get_allocator_backend()) else 1)
    failed = False
    vmmkit = None
    if mode in ("vmmkit", "tags"):
        import vmmkit
        if mode == "vmmkit":
            vmmkit.use_as_torch_allocator()
    rt = runtime()
    torch.manual_seed(0)
    x = torch.randn(N, device="cuda")
    out = torch.empty(N, device="cuda")
    if vmmkit is not None:
        with vmmkit.region("weights", keep_contents=True):
            w = torch.randn(N, device="cuda")
    else:
        w = torch.randn(N, device="cuda")
    expected = torch.relu(x * w + w)
    torch.cuda.synchronize()

    result = graph_api()
    if mode == "native":
        print("capture torch-graph: %s" % ("replayed as eager" if result is True else "FAILED: %r" % (result,)))
        failed |= result is not True
        graph, rc, _ = capture_beside(rt, out, x, w, lambda: None)
        ok = rc == 0 and torch.equal(launch(rt, graph, out), expected)
        print("capture alone: %s" % ("launched, output as eager's" if ok else "FAILED: end capture -> %r" % (rc,)))
        failed |= not ok
        graph, rc, result = capture_beside(rt, out, x, w, torch.cuda.synchronize)
        print("capture beside-synchronize: synchronize -> %s; end capture -> %d%s" % (
            "raised %s" % type(result).__name__ if isinstance(result, BaseException) else result or "returned",
            rc, " (the capture was invalidated)" if rc == 901 else ""))
        graph, error, result = graph_beside(out, x, w, torch.cuda.synchronize)
        print("capture torch-graph-beside-synchronize: synchronize -> %s; the capture %s" % (
            "raised %s" % type(result).__name__ if isinstance(result, BaseException) else result or "returned",
            "failed: %s" % str(error).splitlines()[0][:160] if error else "ended"))
    else:
        failed |= not torch_graph_checks(vmmkit, result, out, x, w, expected)
    if mode == "vmmkit":
        graph, rc, result = capture_beside(rt, out, x, w, vmmkit.pause, tell=vmmkit.library())
        pause_refused = isinstance(result, vmmkit.VmmkitError) and result.code == 900
        print("capture beside-pause: pause -> %s" % ("refused (900)" if pause_refused else "%r" % (result,)))
        first = launch(rt, graph, out) if rc == 0 else None
        ok = pause_refused and first is not None and torch.equal(first, expected)
        print("capture beside-pause: end capture -> %r; %s" % (
            rc, "launched, output as eager's" if ok else "FAILED"))
        failed |= not ok
        if ok:
            failed |= not again_after_pause(vmmkit, lambda: launch(rt, graph, out), first, "after-pause", "launch")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
