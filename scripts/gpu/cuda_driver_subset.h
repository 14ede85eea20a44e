/*
 * cuda_driver_subset.h: the few CUDA driver types, and the helpers, that the driver-only measurement
 * programs here (first_vmm.c, create_after_release.c, copy_after_release.c, unmap_beside.c,
 * page_mappings.c, handle_pieces.c, resume_variants.c, vmm_call_times.c, overlap_backing.c,
 * parallel_grant.c, release_order.c) share.
 * They load libcuda.so.1 with dlopen, so they build with gcc alone, without the CUDA headers. Define PROGRAM (the program's name, for its
 * error messages) before including it.
 */
#ifndef CUDA_DRIVER_SUBSET_H
#define CUDA_DRIVER_SUBSET_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemHandle;
typedef void *CUcontext;
typedef struct {
    int type; /* CU_MEM_ALLOCATION_TYPE_PINNED = 1 */
    int requestedHandleTypes;
    struct { int type; int id; } location; /* CU_MEM_LOCATION_TYPE_DEVICE = 1 */
    void *win32HandleMetaData;
    struct { unsigned char compressionType; unsigned char gpuDirectRDMACapable; unsigned short usage; unsigned char reserved[4]; } allocFlags;
} CUmemAllocationProp;
typedef struct {
    struct { int type; int id; } location;
    int flags; /* CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3 */
} CUmemAccessDesc;

static inline double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* Exits with the call's name and result when it failed. */
static inline void check(const char *what, CUresult r) {
    if (r != 0) { fprintf(stderr, PROGRAM ": %s failed (%d)\n", what, r); exit(1); }
}

/* The driver function name from lib, or exit. */
static inline void *sym(void *lib, const char *name) {
    void *f = dlsym(lib, name);
    if (!f) { fprintf(stderr, PROGRAM ": no %s in libcuda\n", name); exit(1); }
    return f;
}

/* Plain device memory on device 0 (CU_MEM_ALLOCATION_TYPE_PINNED, no handle type, no flags): what
 * a cuMemCreate takes unless a program measures other properties. */
static inline const CUmemAllocationProp *device_memory_prop(void) {
    static CUmemAllocationProp prop = {.type = 1, .location = {.type = 1, .id = 0}};
    return &prop;
}

/* The virtual-memory calls the programs make, set by open_driver. */
static CUresult (*cuCtxSetCurrent)(CUcontext);
static CUresult (*cuMemCreate)(CUmemHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
static CUresult (*cuMemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
static CUresult (*cuMemMap)(CUdeviceptr, size_t, size_t, CUmemHandle, unsigned long long);
static CUresult (*cuMemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
static CUresult (*cuMemUnmap)(CUdeviceptr, size_t);
static CUresult (*cuMemRelease)(CUmemHandle);
static CUresult (*cuCtxSynchronize)(void);

/* Opens libcuda.so.1, finds the calls above, initialises the driver and makes device 0's primary
 * context current; returns the library (for sym) and the context in *context. Exits on failure. */
static inline void *open_driver(CUcontext *context) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) { fprintf(stderr, PROGRAM ": %s\n", dlerror()); exit(1); }
    CUresult (*init)(unsigned) = sym(lib, "cuInit");
    CUresult (*retain)(CUcontext *, int) = sym(lib, "cuDevicePrimaryCtxRetain");
    cuCtxSetCurrent = sym(lib, "cuCtxSetCurrent");
    cuMemCreate = sym(lib, "cuMemCreate");
    cuMemAddressReserve = sym(lib, "cuMemAddressReserve");
    cuMemMap = sym(lib, "cuMemMap");
    cuMemSetAccess = sym(lib, "cuMemSetAccess");
    cuMemUnmap = sym(lib, "cuMemUnmap");
    cuMemRelease = sym(lib, "cuMemRelease");
    cuCtxSynchronize = sym(lib, "cuCtxSynchronize");
    check("cuInit", init(0));
    check("cuDevicePrimaryCtxRetain", retain(context, 0));
    check("cuCtxSetCurrent", cuCtxSetCurrent(*context));
    return lib;
}

#endif
