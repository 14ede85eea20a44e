/*
 * pause_cycles.c: a discarded pause and resume of one handle, many times in one process, as a
 * program pausing a tag in a loop does (unmap + release; create + map + setAccess), with a device
 * synchronisation and a free-memory query between them as the pause-resume benchmark makes. Does
 * anything in how the pause is made decide whether a later resume's create waits for the driver?
 * Each knob is one of the ways vmmkit's pause differs from torch_memory_saver's:
 *   RESERVE_GIB  the reservation around the memory: 0 for exactly its size (as the anchor makes
 *                one per tensor), else that many GiB with the memory at its start (as a tag range)
 *   SYNC         1: cuCtxSynchronize right before the unmap (as vmmkit's pause waits for the device)
 *   WRITE        1: write every byte before each pause (0: only before the first)
 *   RDMA         1: GPUDirect-RDMA-capable handles (the flag torch_memory_saver sets)
 *   GAP_US       optional: microseconds to spin between the pause and the resume (default 0)
 * Build: gcc -O2 -o pause_cycles scripts/gpu/pause_cycles.c -ldl
 * Run: pause_cycles SIZE_MIB CYCLES RESERVE_GIB SYNC WRITE RDMA [GAP_US]; prints "cycle=C pause_us=P resume_us=R
 * create_us=.. access_us=.." per cycle and a summary line "slow=N of M" (resumes over 1.5 ms).
 */
#define _GNU_SOURCE
#include <string.h>
#define PROGRAM "pause_cycles"
#include "cuda_driver_subset.h"

static CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
static CUresult (*cuMemGetInfo)(size_t *, size_t *);

int main(int argc, char **argv) {
    if (argc < 7) { fprintf(stderr, "usage: pause_cycles SIZE_MIB CYCLES RESERVE_GIB SYNC WRITE RDMA\n"); return 2; }
    size_t size = strtoull(argv[1], NULL, 0) << 20;
    int cycles = atoi(argv[2]);
    size_t reserve_bytes = strtoull(argv[3], NULL, 0) << 30;
    int sync_before_unmap = atoi(argv[4]);
    int write_each = atoi(argv[5]);
    CUmemAllocationProp prop = *device_memory_prop();
    prop.allocFlags.gpuDirectRDMACapable = (unsigned char)atoi(argv[6]);
    double gap_us = argc > 7 ? atof(argv[7]) : 0;
    CUcontext context;
    void *lib = open_driver(&context);
    cuMemsetD8 = sym(lib, "cuMemsetD8_v2");
    cuMemGetInfo = sym(lib, "cuMemGetInfo_v2");
    CUdeviceptr va;
    check("cuMemAddressReserve", cuMemAddressReserve(&va, reserve_bytes ? reserve_bytes : size, 0, 0, 0));
    CUmemAccessDesc rw = {{1, 0}, 3};
    int slow = 0;
    for (int cycle = 0; cycle <= cycles; cycle++) {
        CUmemHandle h;
        double t0 = now_us();
        check("cuMemCreate", cuMemCreate(&h, size, &prop, 0));
        double t1 = now_us();
        check("cuMemMap", cuMemMap(va, size, 0, h, 0));
        check("cuMemSetAccess", cuMemSetAccess(va, size, &rw, 1));
        double t2 = now_us();
        if (cycle == 0 || write_each) check("cuMemsetD8", cuMemsetD8(va, (unsigned char)cycle, size));
        check("cuCtxSynchronize", cuCtxSynchronize());
        double t3 = now_us();
        if (sync_before_unmap) check("cuCtxSynchronize", cuCtxSynchronize());
        check("cuMemUnmap", cuMemUnmap(va, size));
        check("cuMemRelease", cuMemRelease(h));
        double t4 = now_us();
        size_t free_bytes, total;
        check("cuCtxSynchronize", cuCtxSynchronize());
        check("cuMemGetInfo", cuMemGetInfo(&free_bytes, &total));
        for (double until = now_us() + gap_us; now_us() < until;) {
        }
        /* cycle 0 is the first backing, before any release */
        if (cycle > 0 && t2 - t0 > 1500) slow++;
        printf("cycle=%d pause_us=%.1f resume_us=%.1f create_us=%.1f access_us=%.1f\n",
               cycle, t4 - t3, t2 - t0, t1 - t0, t2 - t1);
    }
    printf("summary size_mib=%s reserve_gib=%s sync=%d write=%d rdma=%d gap_us=%.0f slow=%d of %d\n", argv[1], argv[3],
           sync_before_unmap, write_each, prop.allocFlags.gpuDirectRDMACapable, gap_us, slow, cycles);
    return 0;
}
