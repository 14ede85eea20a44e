"""A reference llama forward pass in numpy, independent of llama.cpp's code, for LlamaEngineTest:
reads a GGUF model with gguf's reader, decodes greedily from the given vocabulary pieces, and prints
{"ids": [...], "logprobs": [[...], ...]} (each token's whole log-softmax) as one JSON line.

    scripts/gguf-python.sh src/test/python/llama_reference.py MODEL.gguf COUNT PIECE...

The prompt is BOS followed by the named pieces (looked up in the model's own vocabulary), which is
how SentencePiece tokenizes a word that is one piece. Llama as llama.cpp defines it: RMS norm, RoPE
on adjacent pairs (llama's "normal" mode) with base 10000, grouped-query attention with a causal
mask over an f16 KV cache, SwiGLU feed-forward."""
import json
import sys

import numpy as np
from gguf import GGUFReader


def field(reader, name):
    f = reader.fields[name]
    value = f.parts[f.data[0]]
    return value.tolist()[0] if len(value) == 1 else value


def main():
    path, count, pieces = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    reader = GGUFReader(path)
    tensors = {t.name: np.asarray(t.data, dtype=np.float64) for t in reader.tensors}
    tokens_field = reader.fields["tokenizer.ggml.tokens"]
    vocabulary = [bytes(tokens_field.parts[i]).decode() for i in tokens_field.data]
    heads = field(reader, "llama.attention.head_count")
    kv_heads = field(reader, "llama.attention.head_count_kv")
    layers = field(reader, "llama.block_count")
    eps = field(reader, "llama.attention.layer_norm_rms_epsilon")
    bos = field(reader, "tokenizer.ggml.bos_token_id")
    eos = field(reader, "tokenizer.ggml.eos_token_id")
    ids = [bos] + [vocabulary.index(p) for p in pieces]

    def rms(x, weight):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight

    def rope(x):  # x: (positions, heads, head_dim); rotates pairs (2i, 2i+1)
        positions, _, dim = x.shape
        theta = np.arange(positions)[:, None] * 10000.0 ** (-np.arange(0, dim, 2) / dim)[None, :]
        cos, sin = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
        even, odd = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = even * cos - odd * sin
        out[..., 1::2] = even * sin + odd * cos
        return out

    def logits(sequence):
        x = tensors["token_embd.weight"][sequence]
        n, embd = x.shape
        dim = embd // heads
        mask = np.triu(np.full((n, n), -np.inf), 1)
        for layer in range(layers):
            w = lambda name: tensors[f"blk.{layer}.{name}.weight"]
            h = rms(x, w("attn_norm"))
            q = rope((h @ w("attn_q").T).reshape(n, heads, dim))
            k = rope((h @ w("attn_k").T).reshape(n, kv_heads, dim))
            v = (h @ w("attn_v").T).reshape(n, kv_heads, dim)
            # llama.cpp's KV cache holds keys (after RoPE) and values as f16 by default.
            k = k.astype(np.float16).astype(np.float64)
            v = v.astype(np.float16).astype(np.float64)
            k = np.repeat(k, heads // kv_heads, axis=1)
            v = np.repeat(v, heads // kv_heads, axis=1)
            scores = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(dim) + mask
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            x = x + np.einsum("hqk,khd->qhd", scores, v).reshape(n, embd) @ w("attn_output").T
            h = rms(x, w("ffn_norm"))
            gate = h @ w("ffn_gate").T
            x = x + ((gate / (1 + np.exp(-gate))) * (h @ w("ffn_up").T)) @ w("ffn_down").T
        return rms(x[-1], tensors["output_norm.weight"]) @ tensors["output.weight"].T

    produced, logprobs = [], []
    for _ in range(count):
        z = logits(ids + produced)
        z = z - z.max()
        logprobs.append((z - np.log(np.exp(z).sum())).tolist())
        produced.append(int(np.argmax(z)))
        if produced[-1] == eos:
            break
    print(json.dumps({"ids": produced, "logprobs": logprobs}))


if __name__ == "__main__":
    main()
