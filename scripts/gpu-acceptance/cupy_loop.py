#!/usr/bin/env python3
"""A deterministic CuPy workload in which every array is one cudaMalloc / cudaFree.

    python3 cupy_loop.py [--iterations 300] [--repeats 2] [--result FILE]
    vmmkit run --stats stats.json -- python3 cupy_loop.py ...

CuPy's memory pool is switched off (cupy.cuda.set_allocator(None)), so each array allocation calls
cudaMalloc and each array destruction calls cudaFree (which, on the real runtime, synchronises the
device). The loop mixes arange, elementwise math, matmul, reductions, concatenation and fancy
indexing over sizes from 1 KiB to 64 MiB, keeping a ring of recent results alive so lifetimes vary.

It folds every result into a float64 checksum (sums copied to the host, added in a fixed order) and a
SHA-256 of result bytes (the first 1024 elements of every result, and every 25th result whole or,
when large, a strided sample of it). Run it natively and under `vmmkit run`: checksum and hashes
must be identical; compare the loop times.

A warm-up pass (untimed: kernel compilation, cuBLAS handle, vmmkit's JVM start) comes first; then the
timed loop runs --repeats times, each of which must give the same checksum. Prints progress on stderr
and one JSON object on stdout (also written to --result FILE).
"""
import argparse
import hashlib
import json
import math
import os
import sys
import time

KIB, MIB = 1024, 1024 * 1024
# Byte sizes visited (a fixed, mixed order: small, odd, page-sized, large).
SIZES = [1 * KIB, 48 * MIB, 3 * KIB, 2 * MIB, 100 * KIB, 64 * MIB, 700 * KIB, 5 * MIB + 4 * KIB,
         64 * KIB, 1 * MIB, 20 * MIB, 12 * KIB, 33 * MIB + 512, 256 * KIB, 8 * MIB, 1536 * KIB]
KINDS = ["arange", "elementwise", "matmul", "reduction", "concat", "fancy_index"]
KEEP = 8  # results kept alive (a ring): varying lifetimes


def log(msg):
    print(f"cupy_loop: {msg}", file=sys.stderr, flush=True)


def coprime_multiplier(n):
    m = 1_000_003
    while math.gcd(m, n) != 1:
        m += 2
    return m


def step(cp, i):
    """One iteration: returns (kind, result array)."""
    nbytes = SIZES[(i * 7) % len(SIZES)]
    kind = KINDS[i % len(KINDS)]
    n64 = max(nbytes // 8, 1)   # float64 / int64 elements
    n32 = max(nbytes // 4, 1)   # float32 elements
    if kind == "arange":
        x = cp.arange(n64, dtype=cp.float64)
        r = x * 0.5 + (i % 13)
    elif kind == "elementwise":
        x = cp.arange(n32, dtype=cp.float32) / cp.float32(n32)
        y = cp.sin(x * 3.0) * cp.exp(-x) + cp.sqrt(x + 1.0)
        r = cp.where(y > 1.2, y - x, y * 2.0)
    elif kind == "matmul":
        m = int(math.sqrt(n32))
        m = max(16, min(2048, m - m % 16))
        a = (cp.arange(m * m, dtype=cp.float32).reshape(m, m) % 17) / 17.0
        b = cp.ascontiguousarray(a.T[::-1]) - 0.25
        r = a @ b
    elif kind == "reduction":
        x = (cp.arange(n64, dtype=cp.int64) * 2654435761) % 1000003
        f = x.astype(cp.float64) / 1000003.0
        cols = 64 if n64 >= 64 else 1
        rows = n64 // cols
        f2 = f[: rows * cols].reshape(rows, cols)
        r = cp.concatenate([
            f2.sum(axis=0), f2.max(axis=0), f2.min(axis=0), f2.mean(axis=0),
            cp.cumsum(x)[-cols:].astype(cp.float64),
            cp.stack([f.sum(), f.std(), x.max().astype(cp.float64), cp.argmax(x).astype(cp.float64)]),
        ])
    elif kind == "concat":
        parts = [cp.arange(n64 // 3 + k, dtype=cp.float64) * (k + 1) for k in range(3)]
        r = cp.concatenate(parts + [parts[0][::-2]])
    else:  # fancy_index
        n = n64
        idx = (cp.arange(n, dtype=cp.int64) * coprime_multiplier(n)) % n   # a permutation of 0..n-1
        x = cp.arange(n, dtype=cp.float64) * 1.5 - 7.0
        g = x[idx]                      # gather
        s = cp.empty_like(x)
        s[idx] = g * 2.0                # scatter through a permutation: no duplicate index
        mask = (idx % 3) == 0
        r = cp.concatenate([s, x[mask], cp.take(g, idx[: max(n // 4, 1)])])
    return kind, r


def run_loop(cp, iterations, full_hash_every=25):
    total = 0.0
    digest = hashlib.sha256()
    per_kind = {k: hashlib.sha256() for k in KINDS}
    per_kind_sum = {k: 0.0 for k in KINDS}
    ring = []
    for i in range(iterations):
        kind, r = step(cp, i)
        s = float(r.sum(dtype=cp.float64))          # a device-to-host copy
        total += s
        per_kind_sum[kind] += s
        flat = r.ravel()
        head = cp.asnumpy(flat[:1024]).tobytes()
        digest.update(head)
        per_kind[kind].update(head)
        if i % full_hash_every == 0:
            # The whole result when small; else an evenly strided sample of ~256 Ki elements (hashing
            # 64 MiB on the host would dominate the loop time).
            stride = 1 if flat.size <= 262144 else flat.size // 262144 + 1
            whole = cp.asnumpy(flat[::stride]).tobytes()
            digest.update(whole)
            per_kind[kind].update(whole)
        ring.append(r)
        if len(ring) > KEEP:
            ring.pop(0)
        del r, flat
    ring.clear()
    cp.cuda.Device().synchronize()
    return {
        "checksum": float.hex(total),
        "checksum_float": total,
        "sha256": digest.hexdigest(),
        "per_kind_sha256": {k: h.hexdigest() for k, h in per_kind.items()},
        "per_kind_sum": {k: float.hex(v) for k, v in per_kind_sum.items()},
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iterations", type=int, default=300)
    p.add_argument("--repeats", type=int, default=2, help="timed passes over the loop (default %(default)s)")
    p.add_argument("--warmup", type=int, default=48, help="untimed warm-up iterations (default %(default)s)")
    p.add_argument("--label", default=None)
    p.add_argument("--result", default=None, help="also write the result JSON object to this file")
    p.add_argument("--pool", action="store_true",
                   help="keep CuPy's own memory pool (its blocks come from cudaMalloc) instead of switching it off")
    args = p.parse_args()

    preloaded = "libvmmkit_preload" in os.environ.get("LD_PRELOAD", "")
    label = args.label or ("vmmkit-run" if preloaded else "native")

    import cupy as cp
    import numpy as np  # noqa: F401 - cupy needs it; imported for the version

    if not args.pool:
        cp.cuda.set_allocator(None)             # every array: cudaMalloc / cudaFree
    cp.cuda.set_pinned_memory_allocator(None)   # no pinned staging pool either
    dev = cp.cuda.Device(0)
    dev.use()
    props = cp.cuda.runtime.getDeviceProperties(0)
    gpu = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    log(f"{label}: CuPy {cp.__version__} on {gpu}; allocator: "
        + ("CuPy's memory pool" if args.pool else "none (raw cudaMalloc/cudaFree)"))

    t0 = time.perf_counter()
    warm = run_loop(cp, min(args.warmup, args.iterations))
    warmup_s = time.perf_counter() - t0
    log(f"warm-up: {min(args.warmup, args.iterations)} iterations in {warmup_s:.2f} s")

    times, results = [], []
    for rep in range(args.repeats):
        dev.synchronize()
        t0 = time.perf_counter()
        res = run_loop(cp, args.iterations)
        dt = time.perf_counter() - t0
        times.append(dt)
        results.append(res)
        log(f"pass {rep + 1}/{args.repeats}: {args.iterations} iterations in {dt:.3f} s, "
            f"checksum {res['checksum_float']!r}")

    consistent = all(r["checksum"] == results[0]["checksum"] and r["sha256"] == results[0]["sha256"]
                     for r in results)
    if not consistent:
        log("FAIL: the timed passes disagree with each other (the loop is not deterministic in this process)")
    free, total = cp.cuda.runtime.memGetInfo()
    out = dict(results[0])
    out.update({
        "label": label,
        "iterations": args.iterations,
        "repeats": args.repeats,
        "passes_consistent": consistent,
        "pass_checksums": [r["checksum"] for r in results],
        "warmup_checksum": warm["checksum"],
        "warmup_s": round(warmup_s, 4),
        "loop_s": [round(t, 4) for t in times],
        "loop_s_min": round(min(times), 4),
        "ms_per_iteration": round(min(times) / args.iterations * 1e3, 4),
        "device_used_at_end": total - free,
        "pool": args.pool,
        "cupy": cp.__version__,
        "gpu": gpu,
        "ld_preload": os.environ.get("LD_PRELOAD", ""),
    })
    print(json.dumps(out), flush=True)
    if args.result:
        with open(args.result, "w") as f:
            json.dump(out, f)
            f.write("\n")
    return 0 if consistent else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:
        import traceback
        traceback.print_exc()
        log("FAIL: exception (see the traceback above)")
        sys.exit(1)
