#!/usr/bin/env python3
"""numba-cuda device arrays for scripts/gpu/reach.sh: every array is one driver allocation.

    python3 reach_numba.py [--iterations 300] [--result FILE]

Allocates device arrays of mixed sizes (cuda.device_array, cuda.to_device), runs a kernel over
them, copies results back and frees them (numba frees in batches, through cuMemFree). Prints one
JSON object: the SHA-256 of every result, the median iteration time.
"""
import argparse
import hashlib
import json
import sys
import time


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iterations", type=int, default=300)
    p.add_argument("--result", default=None)
    args = p.parse_args()
    import numpy as np
    if not hasattr(np, "row_stack"):
        # NumPy 2.5 removed this alias of vstack, which numba-cuda 0.30 still names when it loads.
        np.row_stack = np.vstack
    from numba import cuda

    @cuda.jit
    def axpb(x, y, a, b):
        i = cuda.grid(1)
        if i < x.size:
            y[i] = a * x[i] + b + (i % 7)

    sizes = [1 << 10, 3 << 20, 1 << 16, 17 << 18, 5000, 1 << 22, 123457, 1 << 20]
    digest = hashlib.sha256()
    keep, times = [], []
    for it in range(args.iterations):
        n = sizes[it % len(sizes)] // 4
        t0 = time.perf_counter()
        x = cuda.to_device(np.arange(n, dtype=np.float32) * (it % 5 + 1))
        y = cuda.device_array(n, dtype=np.float32)
        axpb[(n + 255) // 256, 256](x, y, np.float32(0.5), np.float32(it % 3))
        host = y.copy_to_host()
        times.append(time.perf_counter() - t0)
        digest.update(host[: 4096].tobytes())
        digest.update(host[:: max(1, n // 4096)].tobytes())
        keep.append(y)
        if len(keep) > 6:
            keep.pop(0)
        del x
    keep.clear()
    cuda.synchronize()
    steady = sorted(times[10:]) or sorted(times)
    out = {"workload": "numba", "sha256": digest.hexdigest(), "iteration_ms_median": round(steady[len(steady) // 2] * 1e3, 4),
           "iterations": args.iterations}
    print(json.dumps(out), flush=True)
    if args.result:
        with open(args.result, "w") as f:
            json.dump(out, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
