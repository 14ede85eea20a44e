#!/usr/bin/env python3
"""Two-GPU checks of one process (and a child it spawns), for scripts/gpu/two-gpu.sh.

    python3 two_gpu_checks.py --label NAME [--result FILE] [--native FILE]

Run natively and under `vmmkit run` (with and without PYTORCH_NO_CUDA_MEMORY_CACHING=1). With
--native (the result file of the same checks run natively, same cache setting), a check that failed
natively is not run: it cannot judge vmmkit, and is reported as "not judged". Checks:
  move       a tensor moved cuda:0 -> cuda:1 -> cuda:0 (and non_blocking) keeps its values;
  peer       after cudaDeviceEnablePeerAccess (called through the process's libcudart, as PyTorch
             does), a kernel on cuda:1 reads tensors of cuda:0 allocated before and after the grant;
             then cudaDeviceDisablePeerAccess;
  ipc        torch.multiprocessing (spawn) shares CUDA tensors of both devices with a child, which
             reads them and writes into them; the parent sees the writes. PyTorch refuses to share
             CUDA tensors with its cache off: the refusal is found before the child starts, and
             reported ("refused"), not waited on.
One JSON line per check on stdout and a result line (also written to --result FILE). Exits 1 if a
check failed.
"""
import argparse
import ctypes
import json
import os
import sys
import time
import traceback


def emit(obj):
    print(json.dumps(obj), flush=True)


def cudart():
    """The libcudart this process loaded (the one PyTorch calls), so vmmkit's shim answers it by handle."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            if "libcudart.so" in line:
                return ctypes.CDLL(line.split()[-1])
    raise RuntimeError("no libcudart.so loaded in this process")


def check_move(torch):
    a = torch.arange(1 << 20, dtype=torch.float32, device="cuda:0") * 0.5
    b = a.to("cuda:1")
    c = b.to("cuda:0")
    d = a.to("cuda:1", non_blocking=True)
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    ok = torch.equal(a, c) and torch.equal(b.cpu(), a.cpu()) and torch.equal(d.cpu(), a.cpu())
    return ok, {"elements": a.numel()}


PEER_KERNEL = r"""
extern "C" __global__ void sum_peer(const float *src, float *dst, long long n) {
    long long i = blockIdx.x * (long long) blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] + 1.0f;
}
"""


def check_peer(torch):
    rt = cudart()
    rt.cudaSetDevice.argtypes = [ctypes.c_int]
    rt.cudaDeviceEnablePeerAccess.argtypes = [ctypes.c_int, ctypes.c_uint]
    rt.cudaDeviceDisablePeerAccess.argtypes = [ctypes.c_int]
    can = torch.cuda.can_device_access_peer(1, 0)
    if not can:
        return True, {"skipped": "device 1 cannot access device 0 (no P2P on this machine)"}
    n = (1 << 22) + 17
    before = torch.arange(n, dtype=torch.float32, device="cuda:0")
    rt.cudaGetLastError.restype = ctypes.c_int
    torch.cuda.set_device(1)
    rc = rt.cudaDeviceEnablePeerAccess(0, 0)
    # 704: PyTorch had already enabled it. The runtime also keeps 704 as the thread's last error,
    # which PyTorch's next kernel-launch check would raise ("peer access is already enabled"): clear it.
    rt.cudaGetLastError()
    if rc not in (0, 704):
        return False, {"enable_rc": rc}
    enabled_here = rc == 0
    after = torch.arange(n, dtype=torch.float32, device="cuda:0") * 2
    try:
        import cupy
    except ImportError:
        return False, {"error": "CuPy is needed to launch a kernel on raw peer pointers"}
    results = {}
    ok = True
    with cupy.cuda.Device(1):
        kernel = cupy.RawKernel(PEER_KERNEL, "sum_peer")
        for name, src in (("allocated_before_grant", before), ("allocated_after_grant", after)):
            out = torch.empty(n, dtype=torch.float32, device="cuda:1")
            torch.cuda.synchronize(0)
            kernel(((n + 255) // 256,), (256,), (cupy.uint64(src.data_ptr()), cupy.uint64(out.data_ptr()),
                                                 cupy.int64(n)))
            cupy.cuda.Device(1).synchronize()
            same = torch.equal(out.cpu(), src.cpu() + 1)
            results[name] = same
            ok = ok and same
    # Only a grant made here is taken back: PyTorch's own stays, as PyTorch expects.
    rc = rt.cudaDeviceDisablePeerAccess(0) if enabled_here else 0
    rt.cudaGetLastError()
    results.update(disable_rc=rc, enabled_here=enabled_here)
    torch.cuda.set_device(0)
    return ok and rc == 0, results


def ipc_child(queue, done):
    import torch
    t0, t1 = queue.get()
    sums = [float(t0.sum().item()), float(t1.sum().item())]
    t0.add_(1)
    t1.mul_(2)
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    done.put(sums)
    queue.get()  # hold the tensors until the parent has looked


def check_ipc(torch):
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    queue, done = ctx.Queue(), ctx.Queue()
    from multiprocessing.reduction import ForkingPickler
    t0 = torch.ones(3 << 18, device="cuda:0")
    t1 = torch.full((5 << 18,), 3.0, device="cuda:1")
    try:
        # What queue.put would do on its feeder thread, where a refusal is only printed: here it raises.
        ForkingPickler.dumps((t0, t1))
    except RuntimeError as e:
        return None, {"refused": str(e).splitlines()[0][:300]}
    child = ctx.Process(target=ipc_child, args=(queue, done))
    child.start()
    queue.put((t0, t1))
    sums = None
    deadline = time.time() + 120
    while sums is None and time.time() < deadline:
        try:
            sums = done.get(timeout=1)
        except Exception:  # queue.Empty: still working, unless the child is gone
            if not child.is_alive():
                return False, {"child_exit": child.exitcode, "error": "the child ended without answering"}
    if sums is None:
        child.kill()
        return False, {"error": "no answer from the child in 120 s"}
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    seen = [float(t0.min().item()), float(t1.min().item())]
    queue.put("bye")
    child.join(60)
    ok = sums == [float(t0.numel()), 3.0 * t1.numel()] and seen == [2.0, 6.0] and child.exitcode == 0
    return ok, {"child_sums": sums, "parent_sees": seen, "child_exit": child.exitcode}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--label", default="native")
    p.add_argument("--result", default=None)
    p.add_argument("--checks", default="move,peer,ipc")
    p.add_argument("--native", default=None, help="result file of the native run: checks that failed there are not run")
    args = p.parse_args()
    native = {}
    if args.native:
        try:
            with open(args.native) as f:
                native = json.load(f).get("checks", {})
        except (OSError, ValueError):
            native = {}
    import torch
    if torch.cuda.device_count() < 2:
        emit({"label": args.label, "error": "needs 2 GPUs"})
        return 1
    checks = {"move": check_move, "peer": check_peer, "ipc": check_ipc}
    result = {"label": args.label, "preloaded": "libvmmkit_preload" in os.environ.get("LD_PRELOAD", ""),
              "caching": os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") != "1", "checks": {}}
    all_ok = True
    for name in args.checks.split(","):
        start = time.time()
        there = native.get(name)
        if there is not None and there.get("ok") is False:
            ok, details = True, {"not_judged": "fails natively: %s" % (there.get("error") or there)}
        else:
            try:
                ok, details = checks[name](torch)
            except Exception as e:  # report and go on with the next check
                ok, details = False, {"error": repr(e), "trace": traceback.format_exc()[-2000:]}
        if ok is None:  # an expected refusal: reported, not a failure when the native run was refused too
            ok = there is None or "refused" in there
            details["expected_refusal"] = True
        details.update(ok=ok, seconds=round(time.time() - start, 2))
        result["checks"][name] = details
        emit({"check": name, **details})
        all_ok = all_ok and ok
    result["ok"] = all_ok
    emit(result)
    if args.result:
        with open(args.result, "w") as f:
            json.dump(result, f)
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
