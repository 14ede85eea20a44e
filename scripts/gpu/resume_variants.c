/*
 * resume_variants.c: does where and how a paused tag's memory is backed change what its resume
 * costs? One process, one memory size, several variants of the same discarded pause and resume
 * (unmap + release; create + map + setAccess), taken in turn so that every variant meets the same
 * driver state: a reservation of exactly the size (as torch_memory_saver makes one per tensor), the
 * start of a 286 GiB reservation and a place deep inside one (as vmmkit's tag ranges), a
 * GPUDirect-RDMA-capable handle (the flag torch_memory_saver sets), and an exportable one.
 * Build: gcc -O2 -o resume_variants scripts/gpu/resume_variants.c -ldl
 * Run: resume_variants SIZE_MIB CYCLES; prints "variant NAME cycle=C pause_us=P resume_us=R
 * create_us=.. map_us=.. access_us=..".
 */
#define _GNU_SOURCE
#include <string.h>
#define PROGRAM "resume_variants"
#include "cuda_driver_subset.h"

static CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);

typedef struct {
    const char *name;
    CUdeviceptr address;
    int rdma;
    int exportable;
} Variant;

static size_t size;

static CUdeviceptr reserve(size_t bytes) {
    CUdeviceptr base;
    check("cuMemAddressReserve", cuMemAddressReserve(&base, bytes, 0, 0, 0));
    return base;
}

/* Creates, maps and grants v's memory; returns the handle and prints nothing. */
static CUmemHandle back(const Variant *v, double *create_us, double *map_us, double *access_us) {
    CUmemAllocationProp prop = {0};
    prop.type = 1; prop.location.type = 1;
    prop.requestedHandleTypes = v->exportable ? 1 : 0;
    prop.allocFlags.gpuDirectRDMACapable = (unsigned char)v->rdma;
    CUmemAccessDesc rw = {{1, 0}, 3};
    CUmemHandle h;
    double t0 = now_us();
    check("cuMemCreate", cuMemCreate(&h, size, &prop, 0));
    double t1 = now_us();
    check("cuMemMap", cuMemMap(v->address, size, 0, h, 0));
    double t2 = now_us();
    check("cuMemSetAccess", cuMemSetAccess(v->address, size, &rw, 1));
    double t3 = now_us();
    *create_us = t1 - t0; *map_us = t2 - t1; *access_us = t3 - t2;
    return h;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: resume_variants SIZE_MIB CYCLES\n"); return 2; }
    size = strtoull(argv[1], NULL, 0) << 20;
    int cycles = atoi(argv[2]);
    CUcontext context;
    void *lib = open_driver(&context);
    cuMemsetD8 = sym(lib, "cuMemsetD8_v2");
    size_t big = (size_t)286 << 30;
    CUdeviceptr wide = reserve(big), wide2 = reserve(big);
    Variant variants[] = {
        {"exact", reserve(size), 0, 0},
        {"wide-start", wide, 0, 0},
        {"wide-deep", wide2 + ((size_t)100 << 30) + ((size_t)2 << 20), 0, 0},
        {"exact-rdma", reserve(size), 1, 0},
        {"wide-exportable", wide + size, 0, 1},
    };
    int n = sizeof variants / sizeof *variants;
    for (int cycle = 0; cycle <= cycles; cycle++) {
        for (int k = 0; k < n; k++) {
            Variant *v = &variants[(k + cycle) % n]; /* each cycle starts at the next variant */
            double c, m, a;
            double t0 = now_us();
            CUmemHandle h = back(v, &c, &m, &a);
            double resumed = now_us() - t0;
            check("cuMemsetD8", cuMemsetD8(v->address, (unsigned char)cycle, size));
            check("cuCtxSynchronize", cuCtxSynchronize());
            double t1 = now_us();
            check("cuMemUnmap", cuMemUnmap(v->address, size));
            check("cuMemRelease", cuMemRelease(h));
            double paused = now_us() - t1;
            /* cycle 0 is each variant's first backing, a process's first create of its kind */
            printf("variant %s size_mib=%s cycle=%d pause_us=%.1f resume_us=%.1f create_us=%.1f map_us=%.1f access_us=%.1f\n",
                   v->name, argv[1], cycle, paused, resumed, c, m, a);
        }
    }
    return 0;
}
