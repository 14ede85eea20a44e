#!/usr/bin/env python3
"""JAX programs whose allocations go through the CUDA driver API, for traces and live ratios.

    python3 jax_workloads.py NAME

XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async and XLA_PYTHON_CLIENT_PREALLOCATE=false are set before JAX
starts (unless already set): every buffer XLA makes is then one cuMemAllocFromPoolAsync from the
device's default pool, freed with cuMemFreeAsync on its stream, which vmmkit serves (XLA's platform
and BFC allocators make their memory with cuMemCreate, which vmmkit does not serve). Such a program
frees faster than a PyTorch loop: a jitted step is one launch, and its temporary buffer (all of the
step's activations, one allocation) is freed as soon as the launch is queued. Under
`vmmkit run --trace` the trace is the program's own requests.

Workloads (a decoder-only transformer in plain JAX, no Flax):
  jax_train_gpt       training with Adam, sequences padded to one of four lengths (one compiled step
                      per length, as dynamic padding to buckets does)
  jax_generate        greedy decoding into a key/value cache of fixed size, donated to each step
                      (updated in place, as JAX inference code does), two batches
  jax_encode_varying  forward passes at varying batch and length buckets, results kept a few rounds
Prints one JSON line: workload, seconds, checksum.
"""
import json
import os
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_ALLOCATOR", "cuda_async")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402  (after the allocator is chosen)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

VOCAB, LAYERS, WIDTH, HEADS = 32000, 8, 768, 12


def init_model(seed=0):
    key = jax.random.PRNGKey(seed)
    keys = iter(jax.random.split(key, 4 + 4 * LAYERS))
    normal = lambda shape, scale: jax.random.normal(next(keys), shape, jnp.float32) * scale
    layers = []
    for _ in range(LAYERS):
        layers.append({
            "qkv": normal((WIDTH, 3 * WIDTH), WIDTH ** -0.5),
            "out": normal((WIDTH, WIDTH), WIDTH ** -0.5),
            "up": normal((WIDTH, 4 * WIDTH), WIDTH ** -0.5),
            "down": normal((4 * WIDTH, WIDTH), (4 * WIDTH) ** -0.5),
            "norm1": jnp.ones((WIDTH,)), "norm2": jnp.ones((WIDTH,)),
        })
    return {"embed": normal((VOCAB, WIDTH), 0.02), "layers": layers, "norm": jnp.ones((WIDTH,))}


def rms_norm(x, scale):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * scale


def attention(q, k, v, mask):
    """q: [b, h, t, d], k/v: [b, h, s, d], mask: [t, s] or [b, 1, t, s] of booleans."""
    scores = jnp.einsum("bhtd,bhsd->bhts", q, k) / np.sqrt(q.shape[-1])
    scores = jnp.where(mask, scores, -1e9)
    return jnp.einsum("bhts,bhsd->bhtd", jax.nn.softmax(scores, axis=-1), v)


def split_heads(x):
    b, t, _ = x.shape
    return x.reshape(b, t, HEADS, WIDTH // HEADS).transpose(0, 2, 1, 3)


def merge_heads(x):
    b, h, t, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, t, h * d)


def projections(layer, x):
    """The layer's queries, keys and values of x, each [b, h, t, d]."""
    q, k, v = jnp.split(rms_norm(x, layer["norm1"]) @ layer["qkv"], 3, axis=-1)
    return split_heads(q), split_heads(k), split_heads(v)


def block(layer, x, q, k, v, mask):
    x = x + merge_heads(attention(q, k, v, mask)) @ layer["out"]
    h = rms_norm(x, layer["norm2"])
    return x + jax.nn.gelu(h @ layer["up"]) @ layer["down"]


def forward(params, tokens):
    x = params["embed"][tokens]
    t = tokens.shape[1]
    mask = jnp.tril(jnp.ones((t, t), bool))
    for layer in params["layers"]:
        q, k, v = projections(layer, x)
        x = block(layer, x, q, k, v, mask)
    return rms_norm(x, params["norm"]) @ params["embed"].T


def train_gpt(steps=48, batch=16, lengths=(128, 256, 512, 384)):
    params = init_model()
    first = jax.tree_util.tree_map(jnp.zeros_like, params)
    second = jax.tree_util.tree_map(jnp.zeros_like, params)

    def loss_fn(params, tokens, weights):
        logits = forward(params, tokens[:, :-1])
        logp = jax.nn.log_softmax(logits, axis=-1)
        picked = jnp.take_along_axis(logp, tokens[:, 1:, None], axis=-1)[..., 0]
        return -(picked * weights[:, 1:]).sum() / weights[:, 1:].sum()

    @jax.jit
    def step(params, first, second, tokens, weights, count):
        loss, grads = jax.value_and_grad(loss_fn)(params, tokens, weights)
        first = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, first, grads)
        second = jax.tree_util.tree_map(lambda m, g: 0.999 * m + 0.001 * g * g, second, grads)
        adam = lambda p, m, s: p - 3e-4 * (m / (1 - 0.9 ** count)) / (jnp.sqrt(s / (1 - 0.999 ** count)) + 1e-8)
        return jax.tree_util.tree_map(adam, params, first, second), first, second, loss

    rng = np.random.default_rng(0)
    total = 0.0
    for i in range(steps):
        length = lengths[i % len(lengths)]
        tokens = jnp.asarray(rng.integers(0, VOCAB, (batch, length + 1)), jnp.int32)
        real = rng.integers(length // 2, length + 2, batch)  # padding after each sequence's end
        weights = jnp.asarray(np.arange(length + 1)[None, :] < real[:, None], jnp.float32)
        params, first, second, loss = step(params, first, second, tokens, weights, jnp.float32(i + 1))
        total += float(loss)
    return total


def generate(batches=(32, 24), prompt=64, new_tokens=160):
    params = init_model()
    max_len = prompt + new_tokens
    head = WIDTH // HEADS

    @jax.jit
    def prefill(params, tokens, cache_k, cache_v):
        x = params["embed"][tokens]
        t = tokens.shape[1]
        mask = jnp.tril(jnp.ones((t, t), bool))
        for i, layer in enumerate(params["layers"]):
            q, k, v = projections(layer, x)
            cache_k = cache_k.at[i, :, :, :t].set(k)
            cache_v = cache_v.at[i, :, :, :t].set(v)
            x = block(layer, x, q, k, v, mask)
        logits = rms_norm(x[:, -1], params["norm"]) @ params["embed"].T
        return jnp.argmax(logits, axis=-1).astype(jnp.int32), cache_k, cache_v

    def decode(params, token, position, cache_k, cache_v):
        x = params["embed"][token][:, None, :]
        mask = (jnp.arange(max_len) <= position)[None, None, None, :]
        for i, layer in enumerate(params["layers"]):
            q, k, v = projections(layer, x)
            cache_k = jax.lax.dynamic_update_slice(cache_k, k[None], (i, 0, 0, position, 0))
            cache_v = jax.lax.dynamic_update_slice(cache_v, v[None], (i, 0, 0, position, 0))
            x = block(layer, x, q, cache_k[i], cache_v[i], mask)
        logits = rms_norm(x[:, 0], params["norm"]) @ params["embed"].T
        return jnp.argmax(logits, axis=-1).astype(jnp.int32), cache_k, cache_v

    decode = jax.jit(decode, donate_argnums=(3, 4))
    rng = np.random.default_rng(0)
    checksum = 0
    for batch in batches:
        shape = (LAYERS, batch, HEADS, max_len, head)
        cache_k, cache_v = jnp.zeros(shape, jnp.float32), jnp.zeros(shape, jnp.float32)
        tokens = jnp.asarray(rng.integers(0, VOCAB, (batch, prompt)), jnp.int32)
        token, cache_k, cache_v = prefill(params, tokens, cache_k, cache_v)
        out = [token]
        for position in range(prompt, max_len - 1):
            token, cache_k, cache_v = decode(params, token, jnp.int32(position), cache_k, cache_v)
            out.append(token)
        checksum += int(jnp.stack(out).sum())
        del cache_k, cache_v
    return checksum


def encode_varying(rounds=90, keep=3):
    params = init_model()
    encode = jax.jit(lambda p, t: jnp.tanh(forward(p, t)[:, 0, :64]))
    rng = np.random.default_rng(0)
    kept, total = [], 0.0
    for r in range(rounds):
        batch = int(rng.choice([4, 16, 32]))
        length = int(rng.choice([64, 256]))
        tokens = jnp.asarray(rng.integers(0, VOCAB, (batch, length)), jnp.int32)
        kept.append(encode(params, tokens))
        if len(kept) > keep:
            total += float(kept.pop(0).sum())
    return total + sum(float(k.sum()) for k in kept)


WORKLOADS = {
    "jax_train_gpt": train_gpt,
    "jax_generate": generate,
    "jax_encode_varying": encode_varying,
}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in WORKLOADS:
        sys.exit("usage: jax_workloads.py {%s}" % "|".join(sorted(WORKLOADS)))
    name = sys.argv[1]
    start = time.perf_counter()
    checksum = WORKLOADS[name]()
    seconds = time.perf_counter() - start
    print(json.dumps({"workload": name, "seconds": round(seconds, 3), "checksum": checksum,
                      "jax": jax.__version__, "backend": jax.default_backend(),
                      "allocator": os.environ["XLA_PYTHON_CLIENT_ALLOCATOR"]}), flush=True)


if __name__ == "__main__":
    main()
