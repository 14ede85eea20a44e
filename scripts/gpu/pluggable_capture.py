"""A CUDA graph captured on one thread while another thread pauses, with vmmkit as PyTorch's
pluggable allocator (the shim opened by PyTorch, not preloaded, so it sees no capture call itself).

  python3 pluggable_capture.py native   # no vmmkit: the graph alone, then a device synchronisation
                                        # from another thread during its capture
  python3 pluggable_capture.py vmmkit   # vmmkit.pause() from another thread during the capture

Prints one line per check, "capture <name> ..." and exits 1 if a check the mode must pass fails.
"""
import sys
import threading

import torch

LAYERS, WIDTH, BATCH = 4, 4096, 64


def build():
    torch.manual_seed(0)
    weights = [torch.randn(WIDTH, WIDTH, device="cuda") / WIDTH ** 0.5 for _ in range(LAYERS)]
    x = torch.randn(BATCH, WIDTH, device="cuda")
    return weights, x


def forward(weights, x):
    for w in weights:
        x = torch.relu(x @ w)
    return x


def capture_beside(weights, x, beside):
    """Captures forward() with torch.cuda.graph on a thread of its own; once the capture has begun,
    runs beside() on this thread. Returns (graph or None, the capture's error, beside()'s result or
    error, the graph's static output)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture, as PyTorch's documentation asks
        forward(weights, x)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    began, done, out = threading.Event(), threading.Event(), {}

    def capture():
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                out["y"] = forward(weights, x)
                began.set()
                done.wait()
            out["graph"] = graph
        except BaseException as e:
            out["error"] = e
            began.set()

    thread = threading.Thread(target=capture, daemon=True)
    thread.start()
    began.wait()
    try:
        result = beside()
    except BaseException as e:
        result = e
    done.set()
    thread.join()
    return out.get("graph"), out.get("error"), result, out.get("y")


def replays_like(graph, y, eager):
    graph.replay()
    torch.cuda.synchronize()
    return torch.allclose(y, eager, rtol=1e-3, atol=1e-3)


def main():
    mode = sys.argv[1]
    failed = False
    if mode == "vmmkit":
        import vmmkit
        vmmkit.use_as_torch_allocator()
        with vmmkit.region("weights", keep_contents=True):
            weights, x = build()
    else:
        weights, x = build()
    eager = forward(weights, x)
    torch.cuda.synchronize()

    if mode == "native":
        graph, error, _, y = capture_beside(weights, x, lambda: None)
        ok = error is None and replays_like(graph, y, eager)
        print("capture alone: %s" % ("graph replayed, output as eager's" if ok else "FAILED: %r" % (error,)))
        failed |= not ok
        graph, error, result, _ = capture_beside(weights, x, torch.cuda.synchronize)
        print("capture beside-synchronize: synchronize -> %s; capture -> %s" % (
            "raised %s" % type(result).__name__ if isinstance(result, BaseException) else "returned",
            "failed: %s" % str(error).splitlines()[0] if error else "succeeded"))
    else:
        import vmmkit
        graph, error, result, y = capture_beside(weights, x, vmmkit.pause)
        refused = isinstance(result, vmmkit.VmmkitError) and result.code == 900
        print("capture beside-pause: pause -> %s" % ("refused (900)" if refused else "%r" % (result,)))
        ok = refused and error is None and replays_like(graph, y, eager)
        print("capture beside-pause: capture -> %s" % (
            "graph replayed, output as eager's" if ok else "FAILED: %r" % (error,)))
        failed |= not ok
        if ok:
            before = y.clone()
            free_before = torch.cuda.mem_get_info()[0]
            vmmkit.pause("weights")
            released = torch.cuda.mem_get_info()[0] - free_before
            vmmkit.resume("weights")
            graph.replay()
            same = torch.equal(y, before)
            print("capture after-pause: released %.2f GiB; replay after resume %s" % (
                released / 2 ** 30, "bit-identical" if same else "DIFFERENT"))
            failed |= not same
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
