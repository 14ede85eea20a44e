#!/usr/bin/env python3
"""The PyTorch side of scripts/gpu/mlp-vs-torch.sh, and the comparison.

Trains the model of `vmmkit demo mlp` (Linear(inputs, hidden), ReLU, Linear(hidden, classes),
mean softmax cross-entropy, plain SGD) on one synthetic batch of the same size for the same steps,
written so that Python's reference counting frees every temporary at once (no names kept for
intermediates, gradients set to None after each step). Then it reads vmmkit's JSON reports from
--out and prints:
  - vmmkit's peak live tensor bytes against torch.cuda.max_memory_allocated (the peak must be no
    higher), and both peaks above their baselines (parameters and data);
  - the median step time of each and their ratio, with vmmkit's breakdown of where its time goes;
  - the host emulation's losses against CUDA's (same seed: they must agree within float tolerance).
Writes summary.json to --out and exits 1 when a check fails.
"""
import argparse
import json
import os
import statistics
import sys
import time

LOSS_TOLERANCE = 2e-3  # relative, per step, host emulation vs CUDA (float32, approximate exp/log)


def train_torch(a):
    import torch
    import torch.nn.functional as F

    torch.manual_seed(a.seed)
    dev = torch.device("cuda")
    torch.cuda.init()
    torch.cuda.synchronize()
    start_allocated = torch.cuda.memory_allocated()
    centres = torch.rand(a.classes, a.inputs, device=dev) * 2 - 1
    y = torch.arange(a.batch, device=dev) % a.classes
    x = centres[y] + 0.5 * torch.randn(a.batch, a.inputs, device=dev)
    del centres
    model = torch.nn.Sequential(torch.nn.Linear(a.inputs, a.hidden), torch.nn.ReLU(),
                                torch.nn.Linear(a.hidden, a.classes)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr)
    torch.cuda.synchronize()
    baseline = torch.cuda.memory_allocated() - start_allocated
    torch.cuda.reset_peak_memory_stats()
    losses, step_ms, live_after = [], [], []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        loss = F.cross_entropy(model(x), y)
        losses.append(loss.item())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss
        torch.cuda.synchronize()
        step_ms.append((time.perf_counter() - t0) * 1e3)
        live_after.append(torch.cuda.memory_allocated() - start_allocated)
    peak = torch.cuda.max_memory_allocated() - start_allocated
    end = torch.cuda.memory_allocated() - start_allocated
    return {
        "torch_version": torch.__version__,
        "gpu": torch.cuda.get_device_name(0),
        "baseline_allocated_bytes": baseline,
        "max_memory_allocated": peak,
        # Memory that stays after training but is neither parameters nor data: cuBLAS workspace.
        "persistent_extra_bytes": end - baseline,
        "live_bytes_after_step": live_after,
        "losses": losses,
        "step_ms": step_ms,
        "median_step_ms": statistics.median(step_ms),
    }


def load(out, name):
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--inputs", type=int, default=128)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()

    failures = []
    torch_run = train_torch(a)
    cuda = load(a.out, "mlp-cuda.json")
    timing = load(a.out, "mlp-cuda-timing.json")
    host = load(a.out, "mlp-host.json")
    mib = 1 << 20

    print(f"PyTorch {torch_run['torch_version']} on {torch_run['gpu']}; model {a.inputs} -> {a.hidden} -> "
          f"{a.classes}, batch {a.batch}, {a.steps} steps, SGD lr {a.lr}")
    print(f"torch losses: {torch_run['losses'][0]:.5f} -> {torch_run['losses'][-1]:.5f}")
    if torch_run["losses"][-1] >= torch_run["losses"][0]:
        failures.append("PyTorch's loss did not fall (the comparison model is wrong)")

    summary = {"torch": torch_run}
    if cuda is None:
        failures.append("no mlp-cuda.json: the vmmkit CUDA run failed (see mlp-cuda.log)")
    else:
        summary["vmmkit_cuda"] = {k: cuda[k] for k in ("baseline_live_bytes", "peak_live_bytes", "leaks", "ok",
                                                       "allocator_peak_live_bytes", "leak_detection")}
        print(f"vmmkit cuda ({cuda['leak_detection']}): losses {cuda['losses'][0]:.5f} -> {cuda['losses'][-1]:.5f}, "
              f"live bytes after every step == baseline {cuda['baseline_live_bytes']}: "
              f"{all(b == cuda['baseline_live_bytes'] for b in cuda['live_bytes_after_step'])}, leaks {cuda['leaks']}")
        if not cuda["ok"]:
            failures.append("vmmkit cuda run: loss did not fall, live bytes left baseline, or a leak (see mlp-cuda.log)")
        v_peak, t_peak = cuda["peak_live_bytes"], torch_run["max_memory_allocated"]
        t_peak_model = t_peak - torch_run["persistent_extra_bytes"]
        print()
        print("PEAK MEMORY (bytes)            vmmkit      PyTorch")
        print(f"  peak                    {v_peak:>12,d} {t_peak:>12,d}   (vmmkit peak_live_bytes vs torch.cuda.max_memory_allocated)")
        print(f"  baseline (params+data)  {cuda['baseline_live_bytes']:>12,d} {torch_run['baseline_allocated_bytes']:>12,d}")
        print(f"  peak above baseline     {v_peak - cuda['baseline_live_bytes']:>12,d} "
              f"{t_peak - torch_run['baseline_allocated_bytes']:>12,d}")
        print(f"  torch without its persistent extra (cuBLAS workspace, {torch_run['persistent_extra_bytes']:,d} B): "
              f"{t_peak_model:,d}")
        print(f"  vmmkit allocator's own peak (512-byte aligned sizes): {cuda['allocator_peak_live_bytes']:,d}")
        verdict = "OK" if v_peak <= t_peak else "FAILED"
        print(f"  {verdict}: vmmkit peak {v_peak / mib:.3f} MiB vs torch {t_peak / mib:.3f} MiB "
              f"(ratio {v_peak / t_peak:.4f}); without torch's workspace ratio {v_peak / t_peak_model:.4f}")
        if v_peak > t_peak:
            failures.append(f"vmmkit peak {v_peak} > torch.cuda.max_memory_allocated {t_peak}")
        summary["peak_ratio"] = v_peak / t_peak
        summary["peak_ratio_without_torch_workspace"] = v_peak / t_peak_model

    if timing is not None:
        v_ms, t_ms = timing["median_step_ms"], torch_run["median_step_ms"]
        t = timing.get("time_per_step", {})
        print()
        print(f"STEP TIME (median): vmmkit {v_ms:.3f} ms ({timing['leak_detection']} leak detection), "
              f"PyTorch {t_ms:.3f} ms, ratio vmmkit/PyTorch {v_ms / t_ms:.2f}")
        if t:
            print(f"  vmmkit per step: {t['kernel_launches']:.0f} kernel launches taking {t['launch_ms']:.3f} ms on the host, "
                  f"{t['wait_for_device_ms']:.3f} ms waiting for the device (GPU work still queued), "
                  f"{t['rest_ms']:.3f} ms the rest (Java: autograd, scopes, allocator, leak detection)")
        ptx = load(a.out, "mlp-cuda-ptx-timing.json")
        if ptx is not None:
            print(f"  with the PTX matmul instead of cuBLAS: median {ptx['median_step_ms']:.3f} ms, "
                  f"ratio {ptx['median_step_ms'] / t_ms:.2f}")
            summary["step_time_ratio_ptx_matmul"] = ptx["median_step_ms"] / t_ms
        if cuda is not None:
            print(f"  paranoid run (stack trace per tensor and per use): median {cuda['median_step_ms']:.3f} ms")
        summary["step_time_ratio"] = v_ms / t_ms
        summary["vmmkit_timing"] = {"median_step_ms": v_ms, "time_per_step": t}
    else:
        failures.append("no mlp-cuda-timing.json (see mlp-cuda-timing.log)")

    if host is not None and cuda is not None:
        worst, worst_step = 0.0, -1
        for i, (h, c) in enumerate(zip(host["losses"], cuda["losses"])):
            rel = abs(h - c) / max(1.0, abs(h))
            if rel > worst:
                worst, worst_step = rel, i
        print()
        print(f"HOST vs CUDA losses: max relative difference {worst:.2e} at step {worst_step} "
              f"(tolerance {LOSS_TOLERANCE:g}); host {host['losses'][0]:.6f} -> {host['losses'][-1]:.6f}, "
              f"cuda {cuda['losses'][0]:.6f} -> {cuda['losses'][-1]:.6f}")
        if len(host["losses"]) != len(cuda["losses"]) or worst > LOSS_TOLERANCE:
            failures.append(f"host and CUDA losses differ by {worst:.2e} (> {LOSS_TOLERANCE:g}) at step {worst_step}")
        if not host["ok"]:
            failures.append("vmmkit host run did not meet its checks (see mlp-host.log)")
        summary["host_vs_cuda_max_relative_loss_difference"] = worst
    else:
        failures.append("host or CUDA report missing: no loss comparison")

    summary["failures"] = failures
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print()
    for line in failures:
        print("FAILED:", line)
    print("mlp_vs_torch:", "all checks passed" if not failures else f"{len(failures)} check(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
