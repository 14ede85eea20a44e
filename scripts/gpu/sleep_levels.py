"""vLLM's two sleep levels with vmmkit's tags: "weights" (kept) and "kv_cache" (discarded).

    PYTHONPATH=python python3 scripts/gpu/sleep_levels.py [WEIGHTS_GIB] [CACHE_GIB]

Level 1 pauses both tags as their regions set them (the weights backed up to host memory); level 2
pauses the weights with keep_contents=False (discarded) and the cache; then level 1 again, with
keep_contents=True. Each sleep must give back at least 99 % of both tags' bytes, and after each
level-1 wake-up the weights must be bit-identical. Runs serving the tags only, or under `vmmkit
run` when run there. Prints one line per sleep, "sleep level=L ...", and exits 1 when a check fails.
"""
import sys
import time

import torch

import vmmkit

GIB = 1 << 30


def main():
    weights_gib = float(sys.argv[1]) if len(sys.argv) > 1 else 4.0
    cache_gib = float(sys.argv[2]) if len(sys.argv) > 2 else 8.0
    with vmmkit.region("weights", keep_contents=True):
        weights = torch.randn(int(weights_gib * GIB) // 4, device="cuda")
    with vmmkit.region("kv_cache"):
        cache = torch.empty(int(cache_gib * GIB), dtype=torch.uint8, device="cuda")
    cache.fill_(1)
    original = weights.clone().cpu()
    failed = False
    for level, keep in ((1, None), (2, False), (1, True)):
        torch.cuda.synchronize()
        free_before = torch.cuda.mem_get_info()[0]
        t0 = time.perf_counter()
        vmmkit.pause("weights", keep_contents=keep)
        vmmkit.pause("kv_cache")
        pause_ms = (time.perf_counter() - t0) * 1e3
        released = (torch.cuda.mem_get_info()[0] - free_before) / GIB
        t0 = time.perf_counter()
        vmmkit.resume()
        resume_ms = (time.perf_counter() - t0) * 1e3
        intact = torch.equal(weights.cpu(), original)
        ok = released >= 0.99 * (weights_gib + cache_gib) and (intact or level == 2)
        print("sleep level=%d pause_ms=%.1f resume_ms=%.1f released_gib=%.2f weights_intact=%s%s" % (
            level, pause_ms, resume_ms, released, "yes" if intact else "no", "" if ok else " FAILED"), flush=True)
        failed |= not ok
        if level == 2:
            weights.copy_(original.cuda())  # new weights arrive from the trainer
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
