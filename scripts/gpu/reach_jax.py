#!/usr/bin/env python3
"""A small JAX training loop (an MLP with optax's Adam) for scripts/gpu/reach.sh.

    python3 reach_jax.py [--steps 300] [--result FILE]

Deterministic (fixed keys, synthetic data; run with XLA_FLAGS=--xla_gpu_deterministic_ops=true
--xla_gpu_autotune_level=0 so that no algorithm is chosen by timing): run it natively and under
`vmmkit run` with the same XLA_PYTHON_CLIENT_* settings and the hashes must be identical. Prints one
JSON object: the SHA-256 of the final parameters and of every loss, the last loss, the median step time.
"""
import argparse
import hashlib
import json
import os
import sys
import time


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--result", default=None)
    args = p.parse_args()
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    sizes = [512, 2048, 2048, 1024, 10]
    key = jax.random.PRNGKey(0)
    params = []
    for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        key, k = jax.random.split(key)
        params.append((jax.random.normal(k, (m, n), jnp.float32) / np.sqrt(m), jnp.zeros((n,), jnp.float32)))

    def loss_fn(params, x, y):
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = jax.nn.gelu(h)
        return optax.softmax_cross_entropy_with_integer_labels(h, y).mean()

    opt = optax.adam(1e-3)
    state = opt.init(params)

    @jax.jit
    def step(params, state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    data_key = jax.random.PRNGKey(1)
    losses, times = [], []
    for i in range(args.steps):
        data_key, kx, ky = jax.random.split(data_key, 3)
        x = jax.random.normal(kx, (256, sizes[0]), jnp.float32)
        y = jax.random.randint(ky, (256,), 0, sizes[-1])
        t0 = time.perf_counter()
        params, state, loss = step(params, state, x, y)
        loss.block_until_ready()
        times.append(time.perf_counter() - t0)
        losses.append(np.asarray(loss))
    digest = hashlib.sha256()
    for w, b in params:
        digest.update(np.asarray(w).tobytes())
        digest.update(np.asarray(b).tobytes())
    loss_digest = hashlib.sha256(np.stack(losses).tobytes()).hexdigest()
    steady = sorted(times[10:]) or sorted(times)
    out = {"workload": "jax-mlp", "params_sha256": digest.hexdigest(), "losses_sha256": loss_digest,
           "last_loss": float(losses[-1]), "step_ms_median": round(steady[len(steady) // 2] * 1e3, 4),
           "steps": args.steps, "jax": jax.__version__, "backend": jax.default_backend(),
           "allocator": os.environ.get("XLA_PYTHON_CLIENT_ALLOCATOR", "default (bfc)"),
           "preallocate": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "true")}
    print(json.dumps(out), flush=True)
    if args.result:
        with open(args.result, "w") as f:
            json.dump(out, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
