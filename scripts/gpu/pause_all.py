"""Weights kept (8 GiB) and a KV cache discarded (40 GiB), made in that order, paused and resumed
back to back, three cycles: the resume's time and the weights' restore bandwidth (at most: the
resume's time includes the cache's create). Mode "all" pauses with vmmkit.pause(None) (the tags
that discard first); "by-name" pauses the two tags in the order they were made. On a GPU machine:
    PYTHONPATH=python ./vmmkit run --driver cuda -- python3 scripts/gpu/pause_all.py all|by-name
"""
import sys, time, torch
import vmmkit

W, KV = 8 << 30, 40 << 30
with vmmkit.region("weights", keep_contents=True):
    w = torch.empty(W, dtype=torch.uint8, device="cuda")
    w.fill_(7)
with vmmkit.region("kv_cache", keep_contents=False):
    kv = torch.empty(KV, dtype=torch.uint8, device="cuda")
    kv.fill_(1)
torch.cuda.synchronize()
t0 = time.perf_counter()
while vmmkit.host_memory()[1] < W and time.perf_counter() - t0 < 60:
    time.sleep(0.05)
for cycle in (1, 2, 3):
    t = time.perf_counter()
    if sys.argv[1] == "all":
        vmmkit.pause(None)  # the tags that discard first
    else:
        vmmkit.pause("weights"); vmmkit.pause("kv_cache")  # in the order they were made
    torch.cuda.synchronize(); p = time.perf_counter() - t
    t = time.perf_counter(); vmmkit.resume(None); torch.cuda.synchronize(); r = time.perf_counter() - t
    intact = bool((w[:: 1 << 20] == 7).all().item())
    print("pause-all %s cycle=%d pause_ms=%.1f resume_ms=%.1f weights_restore_gibps_at_most=%.1f intact=%s"
          % (sys.argv[1], cycle, p * 1e3, r * 1e3, W / (1 << 30) / r, intact), flush=True)
