"""Stream safety through PyTorch: memory freed while a kernel still reads it is never handed out early.

A spin kernel (torch.cuda._sleep) holds stream s1 for about 200 ms, then a reduction reads buffer A.
A is freed before that work has run, and new buffers are requested and overwritten at once. The
reduction must still see A's original contents.

  --mode pluggable  vmmkit is PyTorch's allocator (CUDAPluggableAllocator): frees reach vmmkit with
                    the allocation's stream, so this exercises stream-ordered reuse.
  --mode native     PyTorch's caching allocator; under `vmmkit run`, torch.cuda.empty_cache() makes
                    it cudaFree the segment while the kernel runs: vmmkit's device-wide free path.
Prints one JSON line per case and exits 1 if any case saw corrupted data.
"""
import argparse
import json
import os
import sys
import time

import torch

SPIN_CYCLES = int(4e8)  # about 200 ms at H200 clocks
N = 16 * 1024 * 1024    # int32 elements: 64 MiB, its own segment in PyTorch's allocator


def use_vmmkit_allocator():
    shim = os.path.join(os.path.dirname(__file__), "..", "..", "target", "native", "libvmmkit_preload.so")
    alloc = torch.cuda.memory.CUDAPluggableAllocator(os.path.abspath(shim), "vmmkit_torch_alloc", "vmmkit_torch_free")
    torch.cuda.memory.change_current_allocator(alloc)


def case(name, new_stream_kind, empty_cache):
    s1 = torch.cuda.Stream()
    s2 = torch.cuda.Stream()
    news = {"other": s2, "same": s1, "default": torch.cuda.default_stream()}[new_stream_kind]
    with torch.cuda.stream(s1):
        a = torch.ones(N, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    a_ptr = a.data_ptr()
    with torch.cuda.stream(s1):
        torch.cuda._sleep(SPIN_CYCLES)
        total = a.sum(dtype=torch.int64)
    t0 = time.perf_counter()
    del a
    if empty_cache:
        torch.cuda.empty_cache()
    free_ms = (time.perf_counter() - t0) * 1e3
    with torch.cuda.stream(news):
        fresh = [torch.full((N,), 7, dtype=torch.int32, device="cuda") for _ in range(3)]
    reused = any(f.data_ptr() == a_ptr for f in fresh)
    still_running = not s1.query()
    torch.cuda.synchronize()
    ok = int(total.item()) == N
    result = {"case": name, "ok": ok, "got": int(total.item()), "expected": N, "free_ms": round(free_ms, 3),
              "new_buffer_at_a": reused, "overwrote_while_kernel_ran": still_running}
    print(json.dumps(result), flush=True)
    del fresh, total
    return ok


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["native", "pluggable"], required=True)
    args = p.parse_args()
    if args.mode == "pluggable":
        use_vmmkit_allocator()
    torch.cuda.init()
    torch.ones(1, device="cuda")  # start the allocator (and vmmkit's JVM) before timing
    ok = True
    ok &= case("other-stream", "other", empty_cache=(args.mode == "native"))
    ok &= case("default-stream", "default", empty_cache=(args.mode == "native"))
    ok &= case("same-stream", "same", empty_cache=(args.mode == "native"))
    print("RESULT", "PASS" if ok else "FAIL", flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
