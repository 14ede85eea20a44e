/*
 * vmm_call_times.c: an LD_PRELOAD library that times a program's own calls of the driver's
 * virtual-memory functions (cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap, cuMemRelease), for
 * programs linked against libcuda (torch_memory_saver): the anchor's driver calls, one by one,
 * beside vmmkit's own breakdown (VMM_LOG=info). Each call of at least 64 MiB is printed on stderr
 * as it returns: "vmm-call NAME bytes=N us=T". Handles and releases carry no size: a release is
 * printed with the size of the handle's create (one thread's calls: the table is not locked). Built
 * by scripts/gpu/pause-resume.sh (TMS_CALL_TIMES=1).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Not cuda_driver_subset.h: its pointers to the driver's functions bear the names this library
 * defines as functions. */
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemHandle;

#define MIN_BYTES ((size_t) 64 << 20)
#define HANDLES 1024

static struct { CUmemHandle handle; size_t size; } sizes[HANDLES];

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* The driver's own function: the next definition, or libcuda's where a program loaded it into a
 * local scope (Python loads extension modules, and their libcuda, with RTLD_LOCAL). */
static void *real(const char *name) {
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        void *lib = dlopen("libcuda.so.1", RTLD_NOW);
        f = lib ? dlsym(lib, name) : NULL;
    }
    if (!f) { fprintf(stderr, "vmm_call_times: no %s\n", name); abort(); }
    return f;
}

static void report(const char *name, size_t bytes, double us) {
    if (bytes >= MIN_BYTES) fprintf(stderr, "vmm-call %s bytes=%zu us=%.1f\n", name, bytes, us);
}

static void remember(CUmemHandle handle, size_t size) {
    for (int i = 0; i < HANDLES; i++)
        if (sizes[i].size == 0) { sizes[i].handle = handle; sizes[i].size = size; return; }
}

static size_t forget(CUmemHandle handle) {
    for (int i = 0; i < HANDLES; i++)
        if (sizes[i].size && sizes[i].handle == handle) { size_t s = sizes[i].size; sizes[i].size = 0; return s; }
    return 0;
}

CUresult cuMemCreate(CUmemHandle *handle, size_t size, const void *prop, unsigned long long flags) {
    static CUresult (*f)(CUmemHandle *, size_t, const void *, unsigned long long);
    if (!f) f = real("cuMemCreate");
    double t = now_us();
    CUresult rc = f(handle, size, prop, flags);
    report("create", size, now_us() - t);
    if (rc == 0) remember(*handle, size);
    return rc;
}

CUresult cuMemMap(CUdeviceptr va, size_t size, size_t offset, CUmemHandle handle, unsigned long long flags) {
    static CUresult (*f)(CUdeviceptr, size_t, size_t, CUmemHandle, unsigned long long);
    if (!f) f = real("cuMemMap");
    double t = now_us();
    CUresult rc = f(va, size, offset, handle, flags);
    report("map", size, now_us() - t);
    return rc;
}

CUresult cuMemSetAccess(CUdeviceptr va, size_t size, const void *desc, size_t count) {
    static CUresult (*f)(CUdeviceptr, size_t, const void *, size_t);
    if (!f) f = real("cuMemSetAccess");
    double t = now_us();
    CUresult rc = f(va, size, desc, count);
    report("set_access", size, now_us() - t);
    return rc;
}

CUresult cuMemUnmap(CUdeviceptr va, size_t size) {
    static CUresult (*f)(CUdeviceptr, size_t);
    if (!f) f = real("cuMemUnmap");
    double t = now_us();
    CUresult rc = f(va, size);
    report("unmap", size, now_us() - t);
    return rc;
}

CUresult cuMemRelease(CUmemHandle handle) {
    static CUresult (*f)(CUmemHandle);
    if (!f) f = real("cuMemRelease");
    double t = now_us();
    CUresult rc = f(handle);
    report("release", forget(handle), now_us() - t);
    return rc;
}
