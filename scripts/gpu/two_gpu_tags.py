#!/usr/bin/env python3
"""Memory tags on two GPUs, for scripts/gpu/two-gpu.sh (under `vmmkit run`, with --pluggable
vmmkit as PyTorch's pluggable allocator, or run plainly, where the region makes vmmkit serve the
tags' memory pools only; PYTHONPATH must hold the repository's python folder).

    python3 two_gpu_tags.py keep|discard [--pluggable]
    python3 two_gpu_tags.py graph

graph: a CUDA graph captured on cuda:1 with vmmkit.cuda_graph (its 1 GiB result and 1 GiB
temporary in the tag), paused and resumed with cuda:0 current: the free memory of cuda:1 must rise
by at least 99 % of 2 GiB and the replay after the resume must be bit-identical.

With cuda:0 current, one region makes a 1 GiB tensor on each device and a small one on cuda:1;
an untagged tensor on cuda:1 follows the region. A pause of the tag, still with cuda:0 current, must
give back the tagged memory of both devices (the driver's free memory rises by at least 99 % of
1 GiB on each); after the resume the untagged tensor is intact, and with keep_contents so are the
tagged ones. Exits 1 when something is not so.
"""
import sys

import torch

import vmmkit

MIB = 1 << 20


def graph_on_second_device():
    torch.cuda.set_device(0)
    with torch.cuda.device(1):
        x = torch.full((256 * MIB,), 2.0, device="cuda:1")  # 1 GiB of floats, outside any tag
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.sqrt(x * 3)
        torch.cuda.synchronize(1)
        graph = torch.cuda.CUDAGraph()
        with vmmkit.cuda_graph(graph, tag="graph", stream=side):
            t = x * 3
            y = torch.sqrt(t)
            del t
        graph.replay()
        torch.cuda.synchronize(1)
        first = y.clone()
    before = torch.cuda.mem_get_info(1)[0]
    vmmkit.pause("graph")  # cuda:0 is current
    released = (torch.cuda.mem_get_info(1)[0] - before) / MIB
    vmmkit.resume("graph")
    with torch.cuda.device(1):
        graph.replay()
        torch.cuda.synchronize(1)
    same = torch.equal(y, first)
    ok = released >= 0.99 * 2048 and same
    print(("ok " if ok else "FAILED ") + str({"released_mib_cuda1": released, "replay_identical": same}), flush=True)
    return 0 if ok else 1


def main():
    if sys.argv[1] == "graph":
        return graph_on_second_device()
    keep = sys.argv[1] == "keep"
    if "--pluggable" in sys.argv:
        vmmkit.use_as_torch_allocator()
    torch.cuda.init()
    torch.cuda.set_device(0)
    for d in (0, 1):
        torch.ones(1, device="cuda:%d" % d)
    with vmmkit.region("kv", keep_contents=keep):
        a = torch.full((1024 * MIB,), 3, dtype=torch.uint8, device="cuda:0")
        b = torch.full((1024 * MIB,), 5, dtype=torch.uint8, device="cuda:1")
        small = torch.full((1000,), 9.0, device="cuda:1")
    untagged = torch.full((1000,), 7.0, device="cuda:1")
    for d in (0, 1):
        torch.cuda.synchronize(d)
    before = [torch.cuda.mem_get_info(d)[0] for d in (0, 1)]
    vmmkit.pause("kv")  # cuda:0 is current
    released = [(torch.cuda.mem_get_info(d)[0] - before[d]) / MIB for d in (0, 1)]
    vmmkit.resume("kv")
    for d in (0, 1):
        torch.cuda.synchronize(d)
    results = {
        "released_mib": released,
        "untagged_intact": bool((untagged == 7).all().item()),
        "shares_a_segment": small.data_ptr() >> 21 == untagged.data_ptr() >> 21,
    }
    ok = all(r >= 0.99 * 1024 for r in released) and results["untagged_intact"] and not results["shares_a_segment"]
    if keep:
        results["tagged_intact"] = [bool((a == 3).all().item()), bool((b == 5).all().item()),
                                    bool((small == 9).all().item())]
        ok = ok and all(results["tagged_intact"])
    print(("ok " if ok else "FAILED ") + str(results), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
