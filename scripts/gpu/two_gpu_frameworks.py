#!/usr/bin/env python3
"""JAX, CuPy and numba on two GPUs, for scripts/gpu/two-gpu.sh.

    python3 two_gpu_frameworks.py --result FILE [--native FILE]

Run natively and under `vmmkit run` (JAX then gets its cuda_async allocator, each buffer served by
vmmkit); every check writes a SHA-256 of the values it computed, and with --native the hashes must
be those of the native run. Checks:
  jax_pmap      a pmap over both devices whose psum crosses them (XLA's collectives), three steps;
  jax_sharded   a jit of a matrix product with its operands sharded over both devices;
  cupy_peer     arrays made on each device, copied from one to the other, combined by a kernel;
  numba_two     a numba kernel on each device over arrays of that device, copied back to the host.
Deterministic inputs (fixed seeds); JAX runs with XLA_FLAGS=--xla_gpu_deterministic_ops=true when the
caller sets it. Prints one JSON line per check and the result. Exits 1 when a check failed or a hash
differs from the native run's.
"""
import argparse
import hashlib
import json
import sys
import time
import traceback

import numpy as np


def digest(*arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(np.asarray(a)).tobytes())
    return h.hexdigest()


def jax_pmap():
    import jax
    import jax.numpy as jnp
    devices = jax.devices("gpu")[:2]
    x = jnp.asarray(np.arange(2 * (1 << 21), dtype=np.float32).reshape(2, -1) / (1 << 21))
    step = jax.pmap(lambda v: v * 0.5 + jax.lax.psum(v, "i") * 0.25, axis_name="i", devices=devices)
    for _ in range(3):
        x = step(x)
    return digest(x), {"devices": [str(d) for d in devices]}


def jax_sharded():
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
    mesh = Mesh(np.array(jax.devices("gpu")[:2]), ("d",))
    rng = np.random.default_rng(3)
    a = jax.device_put(rng.standard_normal((2048, 1024), dtype=np.float32), NamedSharding(mesh, PartitionSpec("d", None)))
    b = jax.device_put(rng.standard_normal((1024, 512), dtype=np.float32), NamedSharding(mesh, PartitionSpec(None, None)))
    c = jax.jit(lambda p, q: jnp.tanh(p @ q).sum(axis=1))(a, b)
    return digest(c), {"shards": len(c.addressable_shards)}


CUPY_KERNEL = r"""
extern "C" __global__ void mix(const float *a, const float *b, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] * 2.0f + b[i];
}
"""


def cupy_peer():
    import cupy
    n = (1 << 22) + 3
    with cupy.cuda.Device(0):
        a = cupy.arange(n, dtype=cupy.float32) / n
    with cupy.cuda.Device(1):
        b = cupy.cos(cupy.arange(n, dtype=cupy.float32))
        a_here = cupy.empty_like(b)
        a_here.data.copy_from_device(a.data, a.nbytes)  # cudaMemcpyPeer-style copy from device 0
        out = cupy.empty_like(b)
        cupy.RawKernel(CUPY_KERNEL, "mix")(((n + 255) // 256,), (256,), (a_here, b, out, cupy.int32(n)))
        result = cupy.asnumpy(out)
    with cupy.cuda.Device(0):
        back = cupy.empty_like(a)
        back.data.copy_from_device(out.data, out.nbytes)
        total = float(cupy.asnumpy(back).astype(np.float64).sum())
    return digest(result), {"sum_back_on_device_0": total}


def numba_two():
    if not hasattr(np, "row_stack"):
        # NumPy 2.5 removed this alias of vstack, which numba-cuda 0.30 still names when it loads (as in reach_numba.py).
        np.row_stack = np.vstack
    from numba import cuda

    @cuda.jit
    def scale(x, factor):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = x[i] * factor + i

    results = []
    for device in (0, 1):
        with cuda.gpus[device]:
            host = np.linspace(0, 1, (1 << 20) + device, dtype=np.float32)
            arr = cuda.to_device(host)
            scale[(arr.size + 255) // 256, 256](arr, np.float32(device + 2))
            results.append(arr.copy_to_host())
    return digest(*results), {"sizes": [r.size for r in results]}


CHECKS = {"jax_pmap": jax_pmap, "jax_sharded": jax_sharded, "cupy_peer": cupy_peer, "numba_two": numba_two}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--result", required=True)
    p.add_argument("--native", default=None, help="the native run's result: its hashes must be matched")
    p.add_argument("--checks", default=",".join(CHECKS))
    args = p.parse_args()
    native = {}
    if args.native:
        with open(args.native) as f:
            native = json.load(f)["checks"]
    result = {"checks": {}}
    ok = True
    for name in args.checks.split(","):
        start = time.time()
        try:
            sha, details = CHECKS[name]()
            check = {"ok": True, "sha256": sha, **details}
            there = native.get(name)
            if there is not None and there.get("ok"):
                check["same_as_native"] = there.get("sha256") == sha
                check["ok"] = check["same_as_native"]
        except Exception as e:  # report and go on
            check = {"ok": False, "error": repr(e), "trace": traceback.format_exc()[-1500:]}
        check["seconds"] = round(time.time() - start, 2)
        result["checks"][name] = check
        print(json.dumps({"check": name, **check}), flush=True)
        ok = ok and check["ok"]
    result["ok"] = ok
    with open(args.result, "w") as f:
        json.dump(result, f)
    print(json.dumps(result), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
