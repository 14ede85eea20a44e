"""Pause and resume of tagged GPU memory: vmmkit (python/vmmkit) or torch_memory_saver (its torch
hook mode); scripts/gpu/pause-resume.sh runs one process per row.

    python pause_resume.py bench vmmkit|vmmkit-pluggable|vmmkit-tags|tms ROWS...     ROWS: SIZE_GIB:keep|discard:single|mixed
    python pause_resume.py scenario [pluggable]         (vmmkit only) CUDA graph + generation

vmmkit: under `vmmkit run`; vmmkit-pluggable: vmmkit as PyTorch's whole allocator; vmmkit-tags: no
`vmmkit run`, vmmkit serving the tags' memory pools only (vmmkit.use_for_tags), as
torch_memory_saver's torch hook mode does. The scenario runs under `vmmkit run` or, without it, in
the tags mode, or with `pluggable` with vmmkit as PyTorch's whole allocator (no pools there, so no
region of a tag holds a pause back).

bench prints, per row, one line
    row IMPL SIZE_GIB CONTENTS LAYOUT cycle=C tensors=N pause_ms=P resume_ms=R free_before=B free_paused=D
        free_after=A released=X kept_backup_gibps=BW_OUT restore_gibps=BW_IN intact=yes|no
        pin_wait_ms=W ready_ms=Y host_pinned_gib=H pause_call_ms=PC resume_call_ms=RC
(vmmkit pins host memory for a kept tag in the background while it is allocated; the first pause is
timed once that memory is ready, W ms after the fill and checksum, Y ms after the allocation began;
PIN_WAIT=0 times it at once; H: pinned host memory vmmkit holds after the cycle; PC, RC: the pause
and the resume call alone, without the synchronisation after it)
and once per process the bandwidth of a plain pinned copy (cudaMemcpyAsync on pinned memory):
    pinned IMPL d2h_gibps=... h2d_gibps=... d2h_first_gibps=... h2d_first_gibps=... (best of 3, and the first: memory never written, device idle before)
Times include a device synchronisation after the call. Sizes in GiB; free memory in GiB, from
cudaMemGetInfo (torch.cuda.mem_get_info), which vmmkit does not intercept.
"""
import os
import random
import sys
import threading
import time

import torch

GIB = 1 << 30
MIB = 1 << 20


def pinned_bandwidth(nbytes=4 * GIB, reps=3):
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    best = {"d2h": 0.0, "h2d": 0.0}
    for rep in range(reps):
        for way in ("d2h", "h2d"):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            if way == "d2h":
                host.copy_(dev, non_blocking=True)
            else:
                dev.copy_(host, non_blocking=True)
            torch.cuda.synchronize()
            gibps = nbytes / GIB / (time.perf_counter() - t0)
            best[way] = max(best[way], gibps)
            if rep == 0:
                best[way + "_first"] = gibps   # into memory never written before, after an idle device
    del host, dev
    torch.cuda.empty_cache()
    return best


def sizes_for(total, layout, rng):
    if layout == "single":
        return [total]
    # Mixed, as weights and KV caches are: many small and medium tensors, some large ones.
    out, left = [], total
    while left > 0:
        s = rng.choice([64 * 1024, 512 * 1024, 2 * MIB, 3 * MIB + 4096, 16 * MIB, 64 * MIB, 100 * MIB, 256 * MIB, 1 * GIB])
        s = min(s, left)
        out.append(s)
        left -= s
    return out


def checksum(tensors):
    total = 0
    for t in tensors:
        words = t.view(torch.int32)
        for chunk in words.split(256 * MIB):
            total += int(chunk.sum(dtype=torch.int64).item())
    return total


def free_gib():
    return torch.cuda.mem_get_info()[0] / GIB


class Vmmkit:
    def __init__(self, mode="vmmkit"):
        import vmmkit
        self.v = vmmkit
        if mode == "vmmkit-pluggable":  # before any CUDA allocation of this process
            vmmkit.use_as_torch_allocator()
        elif mode == "vmmkit-tags":
            vmmkit.use_for_tags()
        self.name = os.environ.get("IMPL_NAME", mode)  # a variant's rows (settings) apart

    def region(self, tag, keep):
        return self.v.region(tag, keep_contents=keep)

    def pause(self, tag):
        self.v.pause(tag)

    def resume(self, tag):
        self.v.resume(tag)

    def forget(self, tag):
        self.v.release_torch_pool(tag)

    def prepared(self, nbytes):
        """Waits until the host memory pinned ahead covers nbytes (PIN_WAIT=0: not at all); returns the seconds waited."""
        if os.environ.get("PIN_WAIT", "1") == "0":
            return 0.0
        t0 = time.perf_counter()
        limit = float(os.environ.get("PIN_WAIT_S", "120"))
        while self.v.host_memory()[1] < nbytes and time.perf_counter() - t0 < limit:
            time.sleep(0.005)
        return time.perf_counter() - t0

    def host_pinned(self):
        return self.v.host_memory()[0]


class Tms:
    name = "tms"

    def __init__(self):
        from torch_memory_saver import torch_memory_saver
        torch_memory_saver.hook_mode = "torch"
        self.t = torch_memory_saver
        self.name = os.environ.get("IMPL_NAME", self.name)  # the anchor's second run in a row apart

    def region(self, tag, keep):
        return self.t.region(tag=tag, enable_cpu_backup=keep)

    def pause(self, tag):
        self.t.pause(tag)

    def resume(self, tag):
        self.t.resume(tag)

    def forget(self, tag):
        pass

    def prepared(self, nbytes):
        return 0.0

    def host_pinned(self):
        return 0


def bench(impl, rows):
    # PINNED_BANDWIDTH=0 skips the pinned copy (and with it the 4 GiB device buffer that an
    # allocator may keep cached afterwards); HOLD_GIB keeps that much device memory allocated outside
    # any tag for the whole process (is a resume slower while more of the device is in use?).
    if os.environ.get("PINNED_BANDWIDTH", "1") != "0":
        bw = pinned_bandwidth()
        print("pinned %s d2h_gibps=%.1f h2d_gibps=%.1f d2h_first_gibps=%.1f h2d_first_gibps=%.1f"
              % (impl.name, bw["d2h"], bw["h2d"], bw["d2h_first"], bw["h2d_first"]), flush=True)
    held = torch.empty(int(float(os.environ.get("HOLD_GIB", "0")) * GIB), dtype=torch.uint8, device="cuda")
    for i, row in enumerate(rows):
        size_gib, contents, layout = row.split(":")
        keep = contents == "keep"
        tag = "row%d" % i
        rng = random.Random(i)
        sizes = sizes_for(int(float(size_gib) * GIB), layout, rng)
        allocated_at = time.perf_counter()
        with impl.region(tag, keep):
            tensors = [torch.empty(s, dtype=torch.uint8, device="cuda") for s in sizes]
        for t in tensors:
            t.view(torch.int32).random_(-2**31, 2**31 - 1)
        expected = checksum(tensors) if keep else 0
        nbytes = sum(sizes) / GIB
        # vmmkit pins host memory for a kept tag in the background as it is allocated: the first
        # pause is measured once that is done (pin_wait_ms: the wait after the fill and checksum;
        # ready_ms: since the allocation began). PIN_WAIT=0 measures it without waiting.
        pin_wait = impl.prepared(sum(sizes)) if keep else 0.0
        ready_ms = (time.perf_counter() - allocated_at) * 1e3 if keep else 0.0
        # Two cycles: the first pins its host memory (both implementations), a second may reuse it.
        for cycle in range(1, int(os.environ.get("PAUSE_CYCLES", "2")) + 1):
            torch.cuda.synchronize()
            before = free_gib()
            t0 = time.perf_counter()
            impl.pause(tag)
            pause_call_s = time.perf_counter() - t0
            torch.cuda.synchronize()
            pause_s = time.perf_counter() - t0
            paused = free_gib()
            # PAUSE_GAP_MS: the other phase's time between a pause and its resume (none by default).
            time.sleep(float(os.environ.get("PAUSE_GAP_MS", "0")) / 1e3)
            t0 = time.perf_counter()
            impl.resume(tag)
            resume_call_s = time.perf_counter() - t0
            torch.cuda.synchronize()
            resume_s = time.perf_counter() - t0
            after = free_gib()
            intact = "yes" if not keep or checksum(tensors) == expected else "no"
            print("row %s %s %s %s cycle=%d tensors=%d pause_ms=%.1f resume_ms=%.1f free_before=%.2f free_paused=%.2f "
                  "free_after=%.2f released=%.2f kept_backup_gibps=%s restore_gibps=%s intact=%s pin_wait_ms=%.0f "
                  "ready_ms=%.0f host_pinned_gib=%.2f pause_call_ms=%.2f resume_call_ms=%.2f"
                  % (impl.name, size_gib, contents, layout, cycle, len(sizes), pause_s * 1e3, resume_s * 1e3, before,
                     paused, after, paused - before, "%.1f" % (nbytes / pause_s) if keep else "-",
                     "%.1f" % (nbytes / resume_s) if keep else "-", intact, pin_wait * 1e3 if cycle == 1 else 0,
                     ready_ms if cycle == 1 else 0, impl.host_pinned() / GIB, pause_call_s * 1e3, resume_call_s * 1e3),
                  flush=True)
        del tensors
        impl.forget(tag)
        torch.cuda.empty_cache()
    del held


def scenario(pluggable=False):
    """Weights (kept) and a KV cache (discarded), a CUDA graph of a decode step captured over them,
    pause, another phase allocates most of the GPU, resume: graph replay and generation must give
    bit-identical output, a pause tried during the capture must be refused without breaking it, and
    so must one while another thread holds a region of a tag open (where PyTorch pools the tags'
    memory: not with vmmkit as its whole allocator, ``pluggable``)."""
    import vmmkit
    if pluggable:
        vmmkit.use_as_torch_allocator()
    torch.manual_seed(0)
    d, vocab, layers = 2048, 32000, 8
    with vmmkit.region("weights", keep_contents=True):
        emb = torch.randn(vocab, d, device="cuda") * 0.02
        wq = [torch.randn(d, d, device="cuda") * d ** -0.5 for _ in range(layers)]
        wo = [torch.randn(d, d, device="cuda") * d ** -0.5 for _ in range(layers)]
        head = torch.randn(d, vocab, device="cuda") * d ** -0.5
    free_now = torch.cuda.mem_get_info()[0]
    t_cap = int(free_now * 0.5 / (layers * d * 4))  # the cache: half the free memory
    with vmmkit.region("kv_cache", keep_contents=False):
        cache = torch.empty(layers, t_cap, d, device="cuda")
    tok = torch.zeros(1, dtype=torch.long, device="cuda")
    pos = torch.zeros(1, dtype=torch.long, device="cuda")
    logits = torch.empty(1, vocab, device="cuda")
    steps = torch.arange(t_cap, device="cuda")

    def step():
        x = emb[tok]                                     # [1, d]
        for i in range(layers):
            q = torch.tanh(x @ wq[i])
            cache[i].index_copy_(0, pos, q)              # write this position's key
            scores = (cache[i] @ q[0]) * d ** -0.5       # [t_cap]
            scores = scores.masked_fill(steps > pos, float("-inf"))
            ctx = torch.softmax(scores, 0) @ cache[i]    # [d]
            x = x + torch.tanh(ctx[None] @ wo[i])
        logits.copy_(x @ head)
        tok.copy_(logits.argmax(-1))
        pos.add_(1)

    def generate(graph, n=24):
        cache.zero_()
        tok.fill_(1)
        pos.zero_()
        out = []
        for _ in range(n):
            graph.replay()
            out.append(int(tok.item()))
        return out, logits.clone().cpu()

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    t0 = time.perf_counter()  # the capture begins while host memory for the kept weights may still be pinned ahead
    with torch.cuda.graph(graph):
        # A pause here would synchronise the device and invalidate the capture: vmmkit refuses it
        # (cudaErrorStreamCaptureUnsupported) and does nothing, and the capture goes on.
        try:
            vmmkit.pause()
            refused = "no"
        except vmmkit.VmmkitError as e:
            refused = "yes" if e.code == 900 else "code %d" % e.code
        step()
    capture_ms = (time.perf_counter() - t0) * 1e3
    tokens_a, logits_a = generate(graph)

    # A pause while a region of a tag is open on another thread is refused (800): PyTorch could hand
    # out the tag's cached blocks there after it.
    inside, leave = threading.Event(), threading.Event()

    def hold_a_region():
        with vmmkit.region("kv_cache", keep_contents=False):
            inside.set()
            leave.wait()

    region_refused = "n/a"
    if not pluggable:
        holder = threading.Thread(target=hold_a_region, daemon=True)
        holder.start()
        inside.wait()
        try:
            vmmkit.pause()
            region_refused = "no"
        except vmmkit.VmmkitError as e:
            region_refused = "yes" if e.code == 800 else "code %d" % e.code
        leave.set()
        holder.join()

    held = torch.cuda.mem_get_info()[0]
    t0 = time.perf_counter()
    vmmkit.pause()
    pause_ms = (time.perf_counter() - t0) * 1e3
    released = torch.cuda.mem_get_info()[0] - held
    other = torch.empty(int(torch.cuda.mem_get_info()[0] * 0.9), dtype=torch.uint8, device="cuda")
    other.fill_(0xAB)  # another phase uses most of the GPU, the released memory included
    torch.cuda.synchronize()
    other_gib = other.numel() / GIB
    del other
    torch.cuda.empty_cache()
    t0 = time.perf_counter()
    vmmkit.resume()
    resume_ms = (time.perf_counter() - t0) * 1e3
    tokens_b, logits_b = generate(graph)
    same = tokens_a == tokens_b and torch.equal(logits_a, logits_b)
    print("scenario graph-replay cache_gib=%.1f released_gib=%.2f other_phase_gib=%.1f pause_ms=%.1f resume_ms=%.1f "
          "tokens=%s identical=%s pause_during_capture_refused=%s capture_ms=%.1f pause_beside_region_refused=%s"
          % (cache.numel() * 4 / GIB, released / GIB, other_gib, pause_ms, resume_ms,
             ",".join(map(str, tokens_a[:8])), "yes" if same else "no", refused, capture_ms, region_refused), flush=True)
    if not same:
        print("scenario: tokens before %s after %s" % (tokens_a, tokens_b), flush=True)
        sys.exit(1)
    if refused != "yes":
        print("scenario: a pause during the graph's capture was not refused (%s)" % refused, flush=True)
        sys.exit(1)
    if region_refused not in ("yes", "n/a"):
        print("scenario: a pause beside an open region of a tag was not refused (%s)" % region_refused, flush=True)
        sys.exit(1)


def main():
    if sys.argv[1] == "scenario":
        scenario(sys.argv[2:] == ["pluggable"])
    else:
        impl = Tms() if sys.argv[2] == "tms" else Vmmkit(sys.argv[2])
        bench(impl, sys.argv[3:])


if __name__ == "__main__":
    main()
