#!/usr/bin/env python3
"""Deterministic small-GPT-2 training run, for comparing PyTorch allocators bit for bit.

    python3 torch_train.py --mode native      [--result FILE]   # PyTorch's own allocator
    vmmkit run -- python3 torch_train.py --mode native          # the shim under PyTorch's allocator
    python3 torch_train.py --mode pluggable   [--so PATH]       # vmmkit as CUDAPluggableAllocator

Pluggable mode needs the embedded JVM to be found through the environment (no LD_PRELOAD):
VMMKIT_JAVA_HOME (a Java 25 home, e.g. runtime/), VMMKIT_JAR (target/vmmkit.jar), VMM_DRIVER=cuda,
and optionally VMM_STATS_FILE.

The model has random weights built from a config (no downloads). Every source of randomness is
seeded and deterministic algorithms are enforced, so the per-step losses must be bit-identical
whichever allocator serves the memory. One JSON object per line on stdout: a line per step, then the
result line (also written to --result FILE).
"""
import argparse
import json
import os
import statistics
import sys
import time

# Must be in the environment before torch (cuBLAS reads it when the first handle is created).
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SO = os.path.normpath(os.path.join(HERE, "..", "..", "target", "native", "libvmmkit_preload.so"))


def log(msg):
    print(f"torch_train: {msg}", file=sys.stderr, flush=True)


def emit(obj):
    print(json.dumps(obj), flush=True)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=["native", "pluggable"], default="native",
                   help="native: PyTorch's allocator (use this under `vmmkit run` too); "
                        "pluggable: vmmkit through CUDAPluggableAllocator")
    p.add_argument("--so", default=os.environ.get("VMMKIT_PRELOAD", DEFAULT_SO),
                   help="the vmmkit shim for --mode pluggable (default: %(default)s)")
    p.add_argument("--steps", type=int, default=25)
    p.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16",
                   help="bf16: autocast to bfloat16 (weights and optimizer fp32); fp32: no autocast, no TF32")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--label", default=None, help="name recorded in the result (default: the mode, "
                   "or 'vmmkit-run' when the shim is preloaded)")
    p.add_argument("--result", default=None, help="also write the result JSON object to this file")
    return p.parse_args()


def batch_schedule(steps, seed, vocab):
    """A fixed list of (batch, seq) shapes; varying shapes make the allocator's life harder."""
    import random
    rng = random.Random(seed)
    shapes = []
    for i in range(steps):
        if i == 1:
            shapes.append((16, 256))  # the largest shape early, so the cache is warmed by a big step
        else:
            shapes.append((rng.choice([2, 4, 6, 8, 12, 16]), rng.choice([32, 64, 96, 128, 160, 192, 224, 256])))
    return shapes


def main():
    args = parse_args()
    preloaded = "libvmmkit_preload" in os.environ.get("LD_PRELOAD", "")
    label = args.label or ("vmmkit-run" if preloaded and args.mode == "native" else args.mode)
    if args.mode == "pluggable" and preloaded:
        log("warning: --mode pluggable with the shim also in LD_PRELOAD; both paths reach vmmkit")

    import torch

    if not torch.cuda.is_available():
        log("FAIL: torch.cuda.is_available() is False")
        return 2

    if args.mode == "pluggable":
        # Before anything initialises CUDA's caching allocator (no allocation, no mem_get_info yet).
        if not os.path.isfile(args.so):
            log(f"FAIL: vmmkit shim not found at {args.so}")
            return 2
        for var in ("VMMKIT_JAVA_HOME", "VMMKIT_JAR", "VMM_DRIVER"):
            if not os.environ.get(var):
                log(f"warning: {var} is not set; the shim falls back to its defaults")
        alloc = torch.cuda.memory.CUDAPluggableAllocator(args.so, "vmmkit_torch_alloc", "vmmkit_torch_free")
        torch.cuda.memory.change_current_allocator(alloc)
        log(f"pluggable allocator installed from {args.so}")

    # Determinism.
    torch.manual_seed(args.seed)
    torch.cuda.manual_seed_all(args.seed)
    # warn_only: an op without a deterministic kernel warns (on stderr) instead of aborting the run;
    # run-all.sh repeats the native run to show whether the run is deterministic at all.
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    free0, total = torch.cuda.mem_get_info(device)
    baseline_used = total - free0  # the CUDA context and whatever else lives on the GPU already

    from transformers import GPT2Config, GPT2LMHeadModel
    import transformers

    cfg_kwargs = dict(n_layer=4, n_embd=256, n_head=4, vocab_size=8192, n_positions=256,
                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    try:
        config = GPT2Config(attn_implementation="eager", **cfg_kwargs)
    except TypeError:
        config = GPT2Config(**cfg_kwargs)
    # Eager attention: plain matmul + softmax, deterministic forward and backward (SDPA kernels may not be).
    try:
        config._attn_implementation = "eager"
    except Exception as e:  # noqa: BLE001 - a read-only property in some versions
        log(f"note: could not force eager attention ({e}); using the default")
    torch.manual_seed(args.seed)
    model = GPT2LMHeadModel(config).to(device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    n_params = sum(p.numel() for p in model.parameters())

    shapes = batch_schedule(args.steps, args.seed, config.vocab_size)
    gen = torch.Generator().manual_seed(args.seed + 1)
    batches = [torch.randint(0, config.vocab_size, shape, generator=gen) for shape in shapes]

    use_bf16 = args.dtype == "bf16"
    losses, step_ms = [], []
    peak_used = 0
    for step, ((b, s), ids_cpu) in enumerate(zip(shapes, batches)):
        torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        ids = ids_cpu.to(device, non_blocking=False)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_bf16):
            out = model(input_ids=ids, labels=ids)
        loss = out.loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        value = loss.detach().float().item()
        del out, loss, ids
        torch.cuda.synchronize(device)
        ms = (time.perf_counter() - t0) * 1e3
        free, _ = torch.cuda.mem_get_info(device)
        peak_used = max(peak_used, total - free)
        losses.append(value)
        step_ms.append(ms)
        emit({"step": step, "batch": b, "seq": s, "loss": float.hex(value), "loss_float": value,
              "ms": round(ms, 3), "device_used": total - free})

    def stat(fn):
        try:
            return int(fn(device))
        except Exception as e:  # noqa: BLE001 - CUDAPluggableAllocator has no device stats
            return None

    timed = step_ms[3:] if len(step_ms) > 3 else step_ms
    result = {
        "mode": args.mode,
        "label": label,
        "losses": [float.hex(v) for v in losses],
        "losses_float": losses,
        "shapes": shapes,
        "peak_allocated": stat(torch.cuda.max_memory_allocated),
        "peak_reserved": stat(torch.cuda.max_memory_reserved),
        "device_total": total,
        "device_used_baseline": baseline_used,
        "device_used_peak": peak_used,
        "device_used_peak_over_baseline": peak_used - baseline_used,
        "step_ms": [round(x, 3) for x in step_ms],
        "step_ms_median": statistics.median(timed) if timed else None,
        "dtype": args.dtype,
        "params": n_params,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "gpu": torch.cuda.get_device_name(device),
        "ld_preload": os.environ.get("LD_PRELOAD", ""),
        "pytorch_cuda_alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "allocator_backend": _backend(torch),
    }
    emit(result)
    if args.result:
        with open(args.result, "w") as f:
            json.dump(result, f)
            f.write("\n")
    return 0


def _backend(torch):
    try:
        return torch.cuda.memory.get_allocator_backend()
    except Exception:  # noqa: BLE001
        return None


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:
        import traceback
        traceback.print_exc()
        log("FAIL: exception (see the traceback above)")
        sys.exit(1)
