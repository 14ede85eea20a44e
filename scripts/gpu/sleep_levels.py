"""vLLM's two sleep levels over two tags: "weights" (kept at level 1) and "kv_cache" (discarded).

    PYTHONPATH=python python3 scripts/gpu/sleep_levels.py [WEIGHTS_GIB] [CACHE_GIB]
    python3 scripts/gpu/sleep_levels.py --vllm DIR [WEIGHTS_GIB] [CACHE_GIB]

By default vmmkit's tags: level 1 pauses the cache and then the weights as their regions set them
(backed up to host memory); level 2 pauses the cache and the weights with keep_contents=False
(discarded); then level 1 again, with keep_contents=True. Runs serving the tags only, or under
`vmmkit run` when run there. With --vllm, the anchor: vLLM's own `CuMemAllocator` (built into DIR by
scripts/gpu/vllm_anchor.py), whose `sleep(offload_tags=("weights",))` is level 1 and
`sleep(offload_tags=())` level 2, as vLLM's worker calls them.

Each wake-up brings the weights back first and then the cache, one tag at a time (as an RL loop
does, updating the weights between the two), and the line gives each tag's time.

SLEEP_GAP_MS (0 by default) waits between each sleep and its wake-up, untimed, as another phase
would: right after a release the driver slows copies to the device for a while (docs/memory-tags.md).

Each sleep must give back at least 99 % of both tags' bytes, and after each level-1 wake-up the
weights must be bit-identical. Prints one line per sleep, "sleep impl=I level=L ...", and exits 1
when a check fails.
"""
import os
import sys
import time

import torch

GIB = 1 << 30


class VmmkitTags:
    name = "vmmkit"

    def __init__(self):
        import vmmkit
        self.vmmkit = vmmkit

    def tagged(self, tag):
        return self.vmmkit.region(tag, keep_contents=(tag == "weights"))

    def sleep(self, level, keep):
        # The discarded cache first, as vmmkit.pause() orders every tag: the driver clears what a
        # release gives back while the weights are copied out, not during the wake-up's copies.
        self.vmmkit.pause("kv_cache")
        self.vmmkit.pause("weights", keep_contents=keep)

    def wake_up(self, tag):
        self.vmmkit.resume(tag)


class VllmCuMem:
    name = "vllm"

    def __init__(self, built):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import vllm_anchor
        self.allocator = vllm_anchor.load(built).get_instance()

    def tagged(self, tag):
        return self.allocator.use_memory_pool(tag=tag)

    def sleep(self, level, keep):
        self.allocator.sleep(offload_tags=("weights",) if level == 1 else tuple())

    def wake_up(self, tag):
        self.allocator.wake_up(tags=[tag])


def main(args):
    if args[1:2] == ["--vllm"]:
        impl = VllmCuMem(args[2])
        args = args[2:]
    else:
        impl = VmmkitTags()
    weights_gib = float(args[1]) if len(args) > 1 else 4.0
    cache_gib = float(args[2]) if len(args) > 2 else 8.0
    gap_ms = float(os.environ.get("SLEEP_GAP_MS", "0"))
    with impl.tagged("weights"):
        weights = torch.randn(int(weights_gib * GIB) // 4, device="cuda")
    with impl.tagged("kv_cache"):
        cache = torch.empty(int(cache_gib * GIB), dtype=torch.uint8, device="cuda")
    cache.fill_(1)
    original = weights.clone().cpu()
    failed = False
    for level, keep in ((1, None), (2, False), (1, True)):
        torch.cuda.synchronize()
        free_before = torch.cuda.mem_get_info()[0]
        t0 = time.perf_counter()
        impl.sleep(level, keep)
        pause_ms = (time.perf_counter() - t0) * 1e3
        released = (torch.cuda.mem_get_info()[0] - free_before) / GIB
        time.sleep(gap_ms / 1e3)  # the other phase, as a trainer's steps would take
        wake_ms = {}
        for tag in ("weights", "kv_cache"):
            t0 = time.perf_counter()
            impl.wake_up(tag)
            torch.cuda.synchronize()
            wake_ms[tag] = (time.perf_counter() - t0) * 1e3
        resume_ms = sum(wake_ms.values())
        intact = torch.equal(weights.cpu(), original)
        ok = released >= 0.99 * (weights_gib + cache_gib) and (intact or level == 2)
        print("sleep impl=%s gap_ms=%g level=%d pause_ms=%.1f resume_ms=%.1f (weights %.1f, kv_cache %.1f) "
              "released_gib=%.2f weights_intact=%s%s" % (
                  impl.name, gap_ms, level, pause_ms, resume_ms, wake_ms["weights"], wake_ms["kv_cache"],
                  released, "yes" if intact else "no", "" if ok else " FAILED"), flush=True)
        failed |= not ok
        if level == 2:
            weights.copy_(original.cuda())  # new weights arrive from the trainer
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main(list(sys.argv))
