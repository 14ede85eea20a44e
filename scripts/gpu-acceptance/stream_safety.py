#!/usr/bin/env python3
"""Stream-safety test of a cudaFree / cudaFreeAsync that does not synchronise (run under vmmkit).

    vmmkit run --driver cuda -- python3 stream_safety.py --expect-nonblocking-free [--result FILE]
    python3 stream_safety.py                      # native control: the real runtime must pass too

Each case fills buffer A with known data and launches a kernel that first spins (--spin-ms, 200 ms by
default) and only then reads A and writes a position-weighted checksum of it. While the kernel still
spins, A is freed without any synchronisation (`del a`), and new buffers of the same size (and of half
the size) are allocated at once and overwritten with other data. After a device synchronisation the
kernel's checksum must equal the checksum of A's original data: memory still in use by in-flight work
must not be handed out again.

Cases (kernel stream / where the new buffers are allocated and written):
  cudaFree, CuPy pool off (set_allocator(None)):   s1 / s2,  s1 / default stream,  default / s2
  cudaFreeAsync, cupy.cuda.MemoryAsyncPool (A allocated and freed on s1, so freed on s1 while the
  kernel runs on s1):                              s1 / s2,  s1 / default stream,  s1 / s1 (stream-ordered
  reuse on the same stream is legal and must still be correct)
  control: no free, A itself overwritten on s2 while the kernel spins: the checksum MUST differ, which
  shows the test can see corruption (if it did not differ, every PASS above would mean nothing).
s1 and s2 are non-blocking streams; the default stream is the legacy NULL stream (which does not
order against non-blocking streams).

Also timed: the free call itself. The real cudaFree waits for the device (about --spin-ms); vmmkit's
must not. With --expect-nonblocking-free a cudaFree taking longer than --max-free-ms is a FAIL.
Prints PASS / FAIL / WARN lines, a JSON summary (also to --result FILE), exits 1 on any FAIL.
"""
import argparse
import json
import os
import sys
import time

KERNEL_SRC = r"""
extern "C" __global__ void spin_then_checksum(const volatile unsigned int* a, unsigned long long n,
                                              unsigned long long spin_ns, unsigned long long* out) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start) :: "memory");
    do {
        __nanosleep(2000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now) :: "memory");
    } while (now - start < spin_ns);
    unsigned long long acc = 0;
    unsigned long long stride = (unsigned long long) gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        acc += (unsigned long long) a[i] * (i * 2654435761ULL + 1ULL);
    atomicAdd(out, acc);
}
"""

KIB, MIB = 1024, 1024 * 1024
SIZES = [4 * KIB, 1 * MIB, 6 * MIB, 64 * MIB]
BLOCKS, THREADS = 32, 256

failures = []
warnings_ = []


def log(msg):
    print(msg, flush=True)


def pattern(np, n, salt):
    i = np.arange(n, dtype=np.uint64)
    return ((i * np.uint64(2246822519) + np.uint64(12345 + 977 * salt)) & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def host_checksum(np, host):
    i = np.arange(host.size, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return int((host.astype(np.uint64) * (i * np.uint64(2654435761) + np.uint64(1))).sum(dtype=np.uint64))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--spin-ms", type=float, default=200.0)
    p.add_argument("--expect-nonblocking-free", action="store_true",
                   help="FAIL when a cudaFree takes longer than --max-free-ms (use under vmmkit run)")
    p.add_argument("--max-free-ms", type=float, default=None, help="default: spin-ms / 4")
    p.add_argument("--label", default=None)
    p.add_argument("--result", default=None)
    args = p.parse_args()
    max_free_ms = args.max_free_ms if args.max_free_ms is not None else args.spin_ms / 4
    preloaded = "libvmmkit_preload" in os.environ.get("LD_PRELOAD", "")
    label = args.label or ("vmmkit-run" if preloaded else "native")

    import numpy as np
    import cupy as cp

    dev = cp.cuda.Device(0)
    dev.use()
    kernel = cp.RawKernel(KERNEL_SRC, "spin_then_checksum")
    s1 = cp.cuda.Stream(non_blocking=True)
    s2 = cp.cuda.Stream(non_blocking=True)
    null = cp.cuda.Stream.null
    streams = {"s1": s1, "s2": s2, "default": null}
    spin_ns = np.uint64(int(args.spin_ms * 1e6))
    sync_pool = None
    async_pool = cp.cuda.MemoryAsyncPool()
    log(f"stream_safety ({label}): CuPy {cp.__version__}, spin {args.spin_ms:.0f} ms, sizes "
        f"{[s for s in SIZES]}, LD_PRELOAD={'vmmkit' if preloaded else 'none'}")

    def use_allocator(kind):
        cp.cuda.set_allocator(sync_pool if kind == "free" else async_pool.malloc)

    def launch(a, n, out, stream, spin):
        with stream:
            kernel((BLOCKS,), (THREADS,), (a, np.uint64(n), np.uint64(spin), out), stream=stream)

    # Warm-up: compile and load the kernel, start vmmkit's JVM (first cudaMalloc), touch both allocators.
    for kind in ("free", "freeasync"):
        use_allocator(kind)
        with s1:
            w = cp.arange(1024, dtype=cp.uint32)
            o = cp.zeros(1, dtype=cp.uint64)
            launch(w, w.size, o, s1, 0)
            s1.synchronize()
            del w, o
        dev.synchronize()

    cases = []

    def run_case(kind, kernel_on, new_on, nbytes, salt, control=False):
        name = f"{'control' if control else kind}/kernel-{kernel_on}/write-{new_on}/{nbytes}B"
        use_allocator(kind)
        n = nbytes // 4
        host = pattern(np, n, salt)
        expected = host_checksum(np, host)
        ks, ns = streams[kernel_on], streams[new_on]
        out = cp.zeros(1, dtype=cp.uint64)
        # With MemoryAsyncPool an array is allocated and later freed on the stream current at allocation:
        # allocate A on the kernel's stream, so `del a` is a cudaFreeAsync on that stream.
        with ks:
            a = cp.empty(n, dtype=cp.uint32)
            ks.synchronize()                        # a stream-ordered allocation is usable everywhere now
            a.set(host)
        dev.synchronize()
        a_ptr = a.data.ptr
        done = cp.cuda.Event(block=False, disable_timing=True)
        t_launch = time.perf_counter()
        launch(a, n, out, ks, spin_ns)
        done.record(ks)
        new = []
        free_ms = realloc_ms = None
        if control:
            with ns:
                a.fill(np.uint32(0xDEADBEEF))
        else:
            t0 = time.perf_counter()
            del a                                   # cudaFree / cudaFreeAsync, no synchronisation first
            free_ms = (time.perf_counter() - t0) * 1e3
            t0 = time.perf_counter()
            with ns:
                for k in range(4):
                    b = cp.empty(n, dtype=cp.uint32)
                    b.fill(np.uint32(0xA5A5A5A5 ^ (k * 0x01010101)))
                    new.append(b)
                for k in range(2):
                    h = cp.empty(max(n // 2, 1), dtype=cp.uint32)
                    h.fill(np.uint32(0x5A5A5A5A ^ k))
                    new.append(h)
            realloc_ms = (time.perf_counter() - t0) * 1e3
        ns.synchronize()                            # the overwrites are done...
        overlapped = not done.done                  # ...while the kernel was still spinning?
        issued_ms = (time.perf_counter() - t_launch) * 1e3
        reused = sum(1 for b in new if b.data.ptr < a_ptr + nbytes and a_ptr < b.data.ptr + b.nbytes)
        dev.synchronize()
        got = int(out.get()[0])
        del new, out
        if control:
            del a
        dev.synchronize()
        ok = (got != expected) if control else (got == expected)
        case = {"name": name, "kind": "control" if control else kind, "kernel_stream": kernel_on,
                "new_stream": new_on, "bytes": nbytes, "expected": hex(expected), "got": hex(got),
                "ok": ok, "free_ms": None if free_ms is None else round(free_ms, 3),
                "realloc_and_issue_ms": None if realloc_ms is None else round(realloc_ms, 3),
                "overwrite_while_kernel_ran": overlapped, "overwrites_done_after_ms": round(issued_ms, 2),
                "new_buffers_at_a_address": reused}
        cases.append(case)
        timing = "" if free_ms is None else f", free {free_ms:.2f} ms, 6 new buffers + writes issued in {realloc_ms:.2f} ms"
        detail = (f"kernel saw {hex(got)}, A held {hex(expected)}{timing}, overwrites done at {issued_ms:.1f} ms "
                  f"{'while the kernel still ran' if overlapped else 'after the kernel had finished'}"
                  f", new buffers at A's address: {reused}")
        if control:
            if ok and overlapped:
                log(f"PASS {name}: the control saw the corruption ({detail})")
            elif ok:
                log(f"PASS {name}: checksum differs ({detail})")
            else:
                failures.append(name)
                log(f"FAIL {name}: overwriting live A did not change the kernel's checksum, so this test "
                    f"cannot detect corruption ({detail})")
            return
        if ok:
            log(f"PASS {name}: {detail}")
        else:
            failures.append(name)
            log(f"FAIL {name}: CORRUPTION: {detail}")
        if kind == "free" and args.expect_nonblocking_free and free_ms > max_free_ms:
            failures.append(name + " (free blocked)")
            log(f"FAIL {name}: cudaFree took {free_ms:.1f} ms (> {max_free_ms:.0f} ms): it waited for the kernel")
        if args.expect_nonblocking_free and not overlapped and kernel_on != new_on:
            warnings_.append(name)
            log(f"WARN {name}: the overwrites only completed after the kernel finished, so this case did not "
                f"exercise a concurrent overwrite")

    salt = 0
    for nbytes in SIZES:
        for kind, kernel_on, new_on in [("free", "s1", "s2"), ("free", "s1", "default"), ("free", "default", "s2"),
                                        ("freeasync", "s1", "s2"), ("freeasync", "s1", "default"),
                                        ("freeasync", "s1", "s1")]:
            salt += 1
            try:
                run_case(kind, kernel_on, new_on, nbytes, salt)
            except Exception as e:  # noqa: BLE001 - report and go on with the other cases
                failures.append(f"{kind}/kernel-{kernel_on}/write-{new_on}/{nbytes}B (error)")
                log(f"FAIL {kind}/kernel-{kernel_on}/write-{new_on}/{nbytes}B: {type(e).__name__}: {e}")
                try:
                    dev.synchronize()
                except Exception:  # noqa: BLE001
                    pass
        salt += 1
        try:
            run_case("free", "s1", "s2", nbytes, salt, control=True)
        except Exception as e:  # noqa: BLE001
            failures.append(f"control/{nbytes}B (error)")
            log(f"FAIL control/{nbytes}B: {type(e).__name__}: {e}")

    cp.cuda.set_allocator(None)
    free_times = [c["free_ms"] for c in cases if c["kind"] == "free" and c["free_ms"] is not None]
    async_times = [c["free_ms"] for c in cases if c["kind"] == "freeasync" and c["free_ms"] is not None]
    summary = {
        "label": label,
        "passed": not failures,
        "failures": failures,
        "warnings": warnings_,
        "spin_ms": args.spin_ms,
        "cudaFree_ms_max": max(free_times) if free_times else None,
        "cudaFree_ms_median": sorted(free_times)[len(free_times) // 2] if free_times else None,
        "cudaFreeAsync_ms_max": max(async_times) if async_times else None,
        "cases": cases,
        "cupy": cp.__version__,
        "ld_preload": os.environ.get("LD_PRELOAD", ""),
    }
    log(f"cudaFree call time: median {summary['cudaFree_ms_median']} ms, max {summary['cudaFree_ms_max']} ms "
        f"(the real cudaFree waits for the {args.spin_ms:.0f} ms kernel); cudaFreeAsync max "
        f"{summary['cudaFreeAsync_ms_max']} ms")
    log(("RESULT PASS" if not failures else f"RESULT FAIL ({len(failures)}): " + "; ".join(failures))
        + (f" [{len(warnings_)} warning(s)]" if warnings_ else ""))
    print(json.dumps(summary), flush=True)
    if args.result:
        with open(args.result, "w") as f:
            json.dump(summary, f)
            f.write("\n")
    return 0 if not failures else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:
        import traceback
        traceback.print_exc()
        print("RESULT FAIL: exception (see the traceback above)", flush=True)
        sys.exit(1)
