"""How fast host memory can be pinned, and how fast the device copies to and from it, each way
(scripts/gpu/pause-resume.sh runs it first, as the native anchor of the pause rows):

    alloc      cudaHostAlloc(portable), as VMM_PINNED_HOST=alloc
    register   mmap + madvise(MADV_HUGEPAGE), faulted in by THREADS threads, then
               cudaHostRegister(portable), as vmmkit's default (VMM_PINNED_HOST=register)
    register-lazy  the same without faulting in first (the driver's pinning faults the pages)

Prints one line per method:
    pinning METHOD gib=G pin_ms=T pin_gibps=R [fault_ms=F register_ms=X]
and per buffer and copy shape (one copy of 4 GiB on one stream; 256 MiB pieces on one stream; the
same pieces alternating between two streams, as vmmkit's CopyStreams):
    copy METHOD shape=single|pieces-1|pieces-2 d2h_gibps=A h2d_gibps=B
and, on a host of several NUMA nodes, the bandwidth from 2 GiB pinned by a thread bound to each node
(copy alloc-nodeN ...; numa nodes=N gpu_node=G).
"""
import ctypes
import ctypes.util
import os
import sys
import threading
import time

import torch

GIB = 1 << 30
MIB = 1 << 20

libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
libc.memset.restype = ctypes.c_void_p


def cudart():
    torch.cuda.init()
    for name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    sys.exit("pinning: no libcudart")


rt = cudart()
vp = ctypes.c_void_p


def check(code, what):
    if code != 0:
        raise RuntimeError("%s failed: CUDA error %d" % (what, code))


def pin_alloc(n):
    p = vp()
    t0 = time.perf_counter()
    check(rt.cudaHostAlloc(ctypes.byref(p), ctypes.c_size_t(n), 1), "cudaHostAlloc")
    return p.value, time.perf_counter() - t0, {}


def huge_mib(p, n):
    """MiB of [p, p + n) the kernel backs with transparent huge pages (/proc/self/smaps)."""
    total, inside = 0, False
    for line in open("/proc/self/smaps"):
        first = line.split()[0]
        if "-" in first and not first.endswith(":"):
            lo, hi = (int(x, 16) for x in first.split("-"))
            inside = lo < p + n and hi > p
        elif inside and first == "AnonHugePages:":
            total += int(line.split()[1])
    return total / 1024


def pin_register(n, fault_threads):
    t0 = time.perf_counter()
    p = libc.mmap(None, n, 3, 0x22, -1, 0)  # PROT_READ|WRITE, MAP_PRIVATE|ANONYMOUS
    if p in (None, ctypes.c_void_p(-1).value):
        raise RuntimeError("mmap failed")
    libc.madvise(p, n, 14)  # MADV_HUGEPAGE
    if fault_threads:
        step = (n // fault_threads + 2 * MIB - 1) & ~(2 * MIB - 1)
        threads = [threading.Thread(target=libc.memset, args=(p + i, 0, min(step, n - i))) for i in range(0, n, step)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    t1 = time.perf_counter()
    check(rt.cudaHostRegister(vp(p), ctypes.c_size_t(n), 1), "cudaHostRegister")
    t2 = time.perf_counter()
    return p, t2 - t0, {"fault_ms": (t1 - t0) * 1e3, "register_ms": (t2 - t1) * 1e3, "huge_mib": huge_mib(p, n)}


def free(method, p, n):
    if method == "alloc":
        check(rt.cudaFreeHost(vp(p)), "cudaFreeHost")
    else:
        check(rt.cudaHostUnregister(vp(p)), "cudaHostUnregister")
        libc.munmap(p, n)


def copies(host, dev, n, shape):
    streams = []
    for _ in range(2):
        s = vp()
        check(rt.cudaStreamCreateWithFlags(ctypes.byref(s), 1), "cudaStreamCreate")
        streams.append(s)
    out = {}
    for way, kind in (("d2h", 2), ("h2d", 1)):
        best = 0.0
        for _ in range(2):
            check(rt.cudaDeviceSynchronize(), "sync")
            t0 = time.perf_counter()
            if shape == "single":
                pieces = [(0, n)]
            else:
                pieces = [(o, min(256 * MIB, n - o)) for o in range(0, n, 256 * MIB)]
            for i, (o, b) in enumerate(pieces):
                s = streams[i % 2] if shape == "pieces-2" else streams[0]
                dst, src = (host + o, dev + o) if kind == 2 else (dev + o, host + o)
                check(rt.cudaMemcpyAsync(vp(dst), vp(src), ctypes.c_size_t(b), kind, s), "cudaMemcpyAsync")
            check(rt.cudaDeviceSynchronize(), "sync")
            best = max(best, n / GIB / (time.perf_counter() - t0))
        out[way] = best
    for s in streams:
        rt.cudaStreamDestroy(s)
    return out


def numa_nodes():
    """{node: [cpus]} from sysfs, and the GPU's node (-1 when unknown)."""
    nodes = {}
    base = "/sys/devices/system/node"
    for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        if name.startswith("node") and name[4:].isdigit():
            cpus = []
            for part in open(os.path.join(base, name, "cpulist")).read().strip().split(","):
                if part:
                    lo, _, hi = part.partition("-")
                    cpus.extend(range(int(lo), int(hi or lo) + 1))
            nodes[int(name[4:])] = cpus
    gpu = -1
    try:
        p = torch.cuda.get_device_properties(0)
        bus = "%04x:%02x:%02x.0" % (p.pci_domain_id, p.pci_bus_id, p.pci_device_id)
        gpu = int(open("/sys/bus/pci/devices/%s/numa_node" % bus).read())
    except Exception:
        pass
    return nodes, gpu


def numa_copies(dev, n):
    """Copy bandwidth from 2 GiB pinned by a thread bound to each NUMA node (cudaHostAlloc places
    the pages where the pinning thread runs): does it matter which thread pins?"""
    nodes, gpu = numa_nodes()
    print("numa nodes=%d gpu_node=%d" % (len(nodes), gpu), flush=True)
    if len(nodes) < 2:
        return
    for node, cpus in nodes.items():
        if not cpus:
            continue
        got = {}

        def pin():
            os.sched_setaffinity(0, cpus)  # this thread only
            got["p"] = pin_alloc(n)[0]
        t = threading.Thread(target=pin)
        t.start()
        t.join()
        bw = copies(got["p"], dev.data_ptr(), n, "pieces-2")
        print("copy alloc-node%d shape=pieces-2 d2h_gibps=%.1f h2d_gibps=%.1f" % (node, bw["d2h"], bw["h2d"]), flush=True)
        free("alloc", got["p"], n)


def main():
    gib = float(os.environ.get("PIN_GIB", "8"))
    n = int(gib * GIB)
    copy_n = min(n, 4 * GIB)
    dev = torch.empty(copy_n, dtype=torch.uint8, device="cuda")
    dev.fill_(7)
    methods = [("alloc", lambda: pin_alloc(n)), ("register", lambda: pin_register(n, 8)),
               ("register-lazy", lambda: pin_register(n, 0))]
    for name, pin in methods:
        try:
            p, took, extra = pin()
        except RuntimeError as e:
            print("pinning %s gib=%g failed: %s" % (name, gib, e), flush=True)
            continue
        print("pinning %s gib=%g pin_ms=%.0f pin_gibps=%.2f %s" % (name, gib, took * 1e3, gib / took,
              " ".join("%s=%.0f" % kv for kv in extra.items())), flush=True)
        for shape in ("single", "pieces-1", "pieces-2"):
            bw = copies(p, dev.data_ptr(), copy_n, shape)
            print("copy %s shape=%s d2h_gibps=%.1f h2d_gibps=%.1f" % (name, shape, bw["d2h"], bw["h2d"]), flush=True)
        t0 = time.perf_counter()
        free("alloc" if name == "alloc" else "register", p, n)
        print("unpin %s free_ms=%.0f" % (name, (time.perf_counter() - t0) * 1e3), flush=True)
    numa_copies(dev, 2 * GIB)


if __name__ == "__main__":
    main()
