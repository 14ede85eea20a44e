"""ResNet-50 training steps in PyTorch, for the step-time rounds of scripts/gpu/resnet.sh.

One process, one allocator: `native` (PyTorch's caching allocator), `expandable` (its expandable
segments; PYTORCH_CUDA_ALLOC_CONF is set by the caller) or `vmmkit` (vmmkit's shim as PyTorch's
pluggable allocator: every tensor's memory comes from vmmkit, no PyTorch cache in between).
Random data and weights, no network. Shapes vary from step to step when --shapes lists several
batch sizes (inference servers and data loaders with a ragged last batch do that), which is the
harder case for an allocator. Prints one JSON line: step times (ms), their median and minimum, and
the host's share of each step (until step() returns, before the synchronisation: when it is close
to the step time, the step waits on the CPU, and every allocator call's cost shows).
"""
import argparse, json, os, statistics, sys, time

import torch
import torchvision


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=("native", "expandable", "vmmkit"))
    p.add_argument("--so", help="vmmkit's shim (mode vmmkit)")
    p.add_argument("--shapes", default="64,48,64,32", help="batch sizes, used in turn")
    p.add_argument("--image", type=int, default=224)
    p.add_argument("--warmup", type=int, default=8)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--json", help="also write the JSON line here")
    a = p.parse_args()
    if a.mode == "vmmkit":
        if not a.so or not os.path.exists(a.so):
            sys.exit(f"resnet_rounds.py: vmmkit needs --so LIBRARY (got {a.so})")
        torch.cuda.memory.change_current_allocator(
            torch.cuda.memory.CUDAPluggableAllocator(a.so, "vmmkit_torch_alloc", "vmmkit_torch_free"))
    torch.manual_seed(0)
    model = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    shapes = [int(s) for s in a.shapes.split(",")]
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(i):
        n = shapes[i % len(shapes)]
        x = torch.randn(n, 3, a.image, a.image, device="cuda").to(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (n,), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for i in range(a.warmup):
        step(i)
    torch.cuda.synchronize()
    times, host = [], []
    for i in range(a.steps):
        t0 = time.perf_counter()
        step(i)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1000)
        host.append((t1 - t0) * 1000)
    # A cycle of shapes is the unit: the median of per-cycle means does not mix batch sizes.
    cycle = len(shapes)
    cycles = [statistics.mean(times[i:i + cycle]) for i in range(0, len(times) - cycle + 1, cycle)]
    host_cycles = [statistics.mean(host[i:i + cycle]) for i in range(0, len(host) - cycle + 1, cycle)]
    result = {"mode": a.mode, "shapes": shapes, "steps": a.steps, "step_ms_all": [round(t, 3) for t in times],
              "step_ms_median": statistics.median(cycles), "step_ms_min": min(cycles),
              "host_ms_median": statistics.median(host_cycles),
              "max_reserved_mib": round(torch.cuda.max_memory_reserved() / 2**20, 1) if a.mode != "vmmkit" else None}
    line = json.dumps(result)
    print(line)
    if a.json:
        with open(a.json, "w") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
