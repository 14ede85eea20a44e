"""Llama-style generation in plain PyTorch (random weights, no network), timed under one allocator.

One "step" is one call of generate(): a prefill of the prompt, then decode tokens one at a time until
TOKENS new tokens exist, with a KV cache that grows by torch.cat each token (as HuggingFace's
DynamicCache does). Each layer: RMSNorm, q/k/v projections, rotary embeddings, eager attention over
the cache (grouped-query, repeat_kv), output projection, RMSNorm, SwiGLU MLP.

Usage: python3 generation.py MODE [options]; prints one JSON line (also written to --json FILE).
MODE: native (PyTorch's caching allocator), expandable (the same with PYTORCH_CUDA_ALLOC_CONF=
expandable_segments:True, set by the caller), vmm-run (run under `vmmkit run`: the caching allocator
over vmmkit's cudaMalloc), vmmkit (vmmkit's shim as PyTorch's pluggable allocator, --so), trivial
(a minimal pluggable allocator, --so: per-size free lists over cudaMalloc).
With --target-allocs N (native mode), the number of new tokens is chosen so that one step makes
about N allocations; the JSON says which (tokens), for the other modes' --tokens.
"""
import argparse
import ctypes
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

MODES = ("native", "expandable", "vmm-run", "vmmkit", "trivial")


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=MODES)
    p.add_argument("--so", help="the pluggable allocator's library (vmmkit, trivial)")
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--intermediate", type=int, default=5632)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--prompt", type=int, default=32)
    p.add_argument("--tokens", type=int, default=0, help="new tokens per step (0: --target-allocs decides)")
    p.add_argument("--target-allocs", type=int, default=32000)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=7)
    p.add_argument("--pairs", type=int, default=50000, help="torch.empty+del pairs per size (0: none)")
    p.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    p.add_argument("--device", default="cuda", help="cuda; cpu only to check the model code")
    p.add_argument("--json", help="also write the JSON line here")
    return p.parse_args()


# ---- the model ---------------------------------------------------------------------------------

class Llama:
    def __init__(self, a, dtype, device):
        self.a, self.dtype, self.device = a, dtype, device
        self.head_dim = a.hidden // a.heads
        g = torch.Generator(device=device).manual_seed(0)

        def w(*shape):  # random weights, made where they live (about 0.5 G parameters: fast on a GPU)
            return torch.empty(*shape, device=device, dtype=dtype).normal_(0.0, 0.02, generator=g)

        kv = a.kv_heads * self.head_dim
        self.embed = w(a.vocab, a.hidden)
        self.layers = [dict(q=w(a.hidden, a.hidden), k=w(kv, a.hidden), v=w(kv, a.hidden), o=w(a.hidden, a.hidden),
                            gate=w(a.intermediate, a.hidden), up=w(a.intermediate, a.hidden),
                            down=w(a.hidden, a.intermediate),
                            norm1=torch.ones(a.hidden, device=device, dtype=dtype),
                            norm2=torch.ones(a.hidden, device=device, dtype=dtype)) for _ in range(a.layers)]
        self.norm = torch.ones(a.hidden, device=device, dtype=dtype)
        self.lm_head = w(a.vocab, a.hidden)
        self.inv_freq = 1.0 / (10000.0 ** (torch.arange(0, self.head_dim, 2, dtype=torch.float32, device=device)
                                           / self.head_dim))

    @staticmethod
    def rms_norm(x, weight, eps=1e-6):
        dtype = x.dtype
        x = x.float()
        variance = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + eps)
        return weight * x.to(dtype)

    def rotary(self, positions):
        freqs = positions[:, None].float() * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(self.dtype), emb.sin().to(self.dtype)

    @staticmethod
    def rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    def apply_rotary(self, q, k, cos, sin):
        return q * cos + self.rotate_half(q) * sin, k * cos + self.rotate_half(k) * sin

    @staticmethod
    def repeat_kv(x, times):
        if times == 1:
            return x
        b, h, t, d = x.shape
        return x[:, :, None, :, :].expand(b, h, times, t, d).reshape(b, h * times, t, d)

    def forward(self, ids, cache, past):
        a = self.a
        b, t = ids.shape
        h = F.embedding(ids, self.embed)
        positions = torch.arange(past, past + t, device=self.device)
        cos, sin = self.rotary(positions)
        mask = None
        if t > 1:  # prefill: causal mask over the prompt
            mask = torch.full((t, t), float("-inf"), device=self.device).triu(1)
        for i, layer in enumerate(self.layers):
            residual = h
            x = self.rms_norm(h, layer["norm1"])
            q = F.linear(x, layer["q"]).view(b, t, a.heads, self.head_dim).transpose(1, 2)
            k = F.linear(x, layer["k"]).view(b, t, a.kv_heads, self.head_dim).transpose(1, 2)
            v = F.linear(x, layer["v"]).view(b, t, a.kv_heads, self.head_dim).transpose(1, 2)
            q, k = self.apply_rotary(q, k, cos, sin)
            if cache[i] is not None:  # DynamicCache.update: concatenate along the sequence
                k = torch.cat((cache[i][0], k), dim=-2)
                v = torch.cat((cache[i][1], v), dim=-2)
            cache[i] = (k, v)
            k = self.repeat_kv(k, a.heads // a.kv_heads)
            v = self.repeat_kv(v, a.heads // a.kv_heads)
            scores = torch.matmul(q, k.transpose(2, 3)) * (1.0 / math.sqrt(self.head_dim))
            if mask is not None:
                scores = scores + mask
            probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
            out = torch.matmul(probs, v).transpose(1, 2).reshape(b, t, a.hidden)
            h = residual + F.linear(out, layer["o"])
            residual = h
            x = self.rms_norm(h, layer["norm2"])
            h = residual + F.linear(F.silu(F.linear(x, layer["gate"])) * F.linear(x, layer["up"]), layer["down"])
        h = self.rms_norm(h[:, -1:, :], self.norm)
        return F.linear(h, self.lm_head).float()

    def generate(self, prompt, new_tokens):
        """The prompt's prefill, then new_tokens - 1 decode steps; greedy. Returns the new ids."""
        with torch.inference_mode():
            cache = [None] * self.a.layers
            logits = self.forward(prompt, cache, 0)
            token = logits[:, -1].argmax(-1, keepdim=True)
            out = [token]
            past = prompt.shape[1]
            for _ in range(new_tokens - 1):
                logits = self.forward(token, cache, past)
                past += 1
                token = logits[:, -1].argmax(-1, keepdim=True)
                out.append(token)
            return torch.cat(out, dim=1)


# ---- the allocator under test ------------------------------------------------------------------

def install_allocator(a):
    """Pluggable modes: installs the library's allocator before CUDA's first allocation."""
    if a.mode not in ("vmmkit", "trivial"):
        return None
    if not a.so or not os.path.exists(a.so):
        sys.exit(f"generation.py: {a.mode} needs --so LIBRARY (got {a.so})")
    names = ("vmmkit_torch_alloc", "vmmkit_torch_free") if a.mode == "vmmkit" else ("trivial_alloc", "trivial_free")
    allocator = torch.cuda.memory.CUDAPluggableAllocator(a.so, *names)
    torch.cuda.memory.change_current_allocator(allocator)
    return ctypes.CDLL(a.so) if a.mode == "trivial" else None


def trivial_figures(lib):
    """The trivial allocator's counters: allocations, frees, cudaMalloc calls, bytes it holds."""
    counts = (ctypes.c_longlong * 4)()
    lib.trivial_stats(counts)
    return dict(allocs=counts[0], frees=counts[1], cuda_mallocs=counts[2], reserved_bytes=counts[3])


def caching_stats_available(mode):
    return mode in ("native", "expandable", "vmm-run")


def allocations_so_far(a, trivial):
    """Allocations made so far, where this mode can count them (None: it cannot in-process)."""
    if a.device != "cuda":
        return None
    if caching_stats_available(a.mode):
        return torch.cuda.memory_stats().get("allocation.all.allocated", 0)
    if trivial is not None:
        return trivial_figures(trivial)["allocs"]
    return None


def device_used_bytes():
    free, total = torch.cuda.mem_get_info()
    return total - free


def sync(a):
    if a.device == "cuda":
        torch.cuda.synchronize()


# ---- measurements ------------------------------------------------------------------------------

def tokens_for_target(a, model, prompt, trivial):
    """New tokens per step for about --target-allocs allocations: allocations are linear in tokens."""
    counts = []
    for n in (4, 12):
        before = allocations_so_far(a, trivial)
        model.generate(prompt, n)
        sync(a)
        counts.append(allocations_so_far(a, trivial) - before)
    per_token = (counts[1] - counts[0]) / 8
    base = counts[0] - 4 * per_token
    return max(2, round((a.target_allocs - base) / per_token)), per_token


def time_steps(a, model, prompt, tokens):
    for _ in range(a.warmup):
        model.generate(prompt, tokens)
    sync(a)
    times = []
    for _ in range(a.steps):
        sync(a)
        start = time.perf_counter()
        model.generate(prompt, tokens)
        sync(a)
        times.append(time.perf_counter() - start)
    return times


def pair_ns(a, size):
    """One torch.empty + del of `size` bytes, in ns (a warm-up first)."""
    for _ in range(min(20000, a.pairs)):
        t = torch.empty(size, dtype=torch.uint8, device=a.device)
        del t
    sync(a)
    start = time.perf_counter()
    for _ in range(a.pairs):
        t = torch.empty(size, dtype=torch.uint8, device=a.device)
        del t
    sync(a)
    return (time.perf_counter() - start) / a.pairs * 1e9


def main():
    a = parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("generation.py: torch cannot use CUDA here")
    if a.mode == "vmm-run" and "vmmkit" not in os.environ.get("LD_PRELOAD", ""):
        sys.exit("generation.py: vmm-run must run under `vmmkit run` (LD_PRELOAD has no vmmkit)")
    if a.mode == "expandable" and "expandable_segments:True" not in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""):
        sys.exit("generation.py: expandable needs PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
    trivial = install_allocator(a) if a.device == "cuda" else None
    baseline = 0
    first_alloc_ms = None
    if a.device == "cuda":
        torch.cuda.init()
        baseline = device_used_bytes()  # the context, before vmmkit's or anyone's memory
        start = time.perf_counter()
        torch.empty(1, device="cuda")  # the first allocation (starts vmmkit's JVM when pluggable)
        first_alloc_ms = (time.perf_counter() - start) * 1e3
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float16
    if a.device == "cpu":
        dtype = torch.float32  # CPU half matmuls are slow or missing in old releases: this run checks code only
    model = Llama(a, dtype, a.device)
    prompt = torch.randint(0, a.vocab, (a.batch, a.prompt), generator=torch.Generator().manual_seed(1)).to(a.device)

    tokens, per_token = a.tokens, None
    if tokens <= 0:
        if allocations_so_far(a, trivial) is None:
            sys.exit(f"generation.py: {a.mode} cannot count allocations; give --tokens")
        tokens, per_token = tokens_for_target(a, model, prompt, trivial)

    times = time_steps(a, model, prompt, tokens)
    before = allocations_so_far(a, trivial)
    model.generate(prompt, tokens)  # one more step, counted
    sync(a)
    after = allocations_so_far(a, trivial)
    result = dict(mode=a.mode, tokens=tokens, prompt=a.prompt, batch=a.batch, layers=a.layers, hidden=a.hidden,
                  dtype=a.dtype, allocs_per_step=None if before is None else after - before,
                  allocs_per_token=None if per_token is None else round(per_token, 1),
                  step_ms_median=round(statistics.median(times) * 1e3, 3),
                  step_ms_min=round(min(times) * 1e3, 3), step_ms_all=[round(t * 1e3, 3) for t in times],
                  first_alloc_ms=None if first_alloc_ms is None else round(first_alloc_ms, 1))
    if a.pairs > 0:
        result["pair_ns_4k"] = round(pair_ns(a, 4096), 1)
        result["pair_ns_1m"] = round(pair_ns(a, 1 << 20), 1)
    if a.device == "cuda":
        result["device_used_mib"] = round((device_used_bytes() - baseline) / 2**20, 1)
        if caching_stats_available(a.mode):
            result["max_reserved_mib"] = round(torch.cuda.max_memory_reserved() / 2**20, 1)
            result["max_allocated_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        if trivial is not None:
            figures = trivial_figures(trivial)
            result["trivial"] = figures
            result["max_reserved_mib"] = round(figures["reserved_bytes"] / 2**20, 1)
    line = json.dumps(result)
    print(line, flush=True)
    if a.json:
        with open(a.json, "w") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
