/*
 * entry_points.c: the driver functions a program asks for by name rather than by symbol.
 *
 * A statically linked runtime, CUDA's own libraries and cuda-python find the driver's functions
 * with cuGetProcAddress (a name, a CUDA version and flags), or through the runtime with
 * cudaGetDriverEntryPoint[ByVersion]; others dlopen libcuda and ask dlsym. Each answer is the
 * driver's own, except for the functions vmmkit serves, where it is vmmkit's: the driver's answer
 * then becomes the real function vmmkit calls when it passes a call through.
 */
#include "shim.h"

#include <string.h>

#define CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM 2
#define WITHOUT_VERSION 12000 /* cudaGetDriverEntryPoint: the current functions */

/* One function vmmkit answers for: the name it is asked for, from which CUDA version on that name
 * means this function, whether it is the per-thread default stream variant, its exported name. */
struct driver_entry {
    const char *asked;
    int since;
    int per_thread;
    const char *exported;
    void *ours;
    void **real_slot;
};

#define ENTRY(asked, since, per_thread, fn) { asked, since, per_thread, #fn, (void *) fn, (void **) &real_cu.fn }
static const struct driver_entry entries[] = {
    ENTRY("cuMemAlloc", 3020, 0, cuMemAlloc_v2),
    ENTRY("cuMemFree", 3020, 0, cuMemFree_v2),
    ENTRY("cuMemAllocPitch", 3020, 0, cuMemAllocPitch_v2),
    ENTRY("cuMemGetAddressRange", 3020, 0, cuMemGetAddressRange_v2),
    ENTRY("cuMemAllocAsync", 11020, 0, cuMemAllocAsync),
    ENTRY("cuMemAllocAsync", 11020, 1, cuMemAllocAsync_ptsz),
    ENTRY("cuMemFreeAsync", 11020, 0, cuMemFreeAsync),
    ENTRY("cuMemFreeAsync", 11020, 1, cuMemFreeAsync_ptsz),
    ENTRY("cuMemAllocFromPoolAsync", 11020, 0, cuMemAllocFromPoolAsync),
    ENTRY("cuMemAllocFromPoolAsync", 11020, 1, cuMemAllocFromPoolAsync_ptsz),
    ENTRY("cuPointerGetAttribute", 4000, 0, cuPointerGetAttribute),
    ENTRY("cuPointerGetAttributes", 7000, 0, cuPointerGetAttributes),
    ENTRY("cuIpcGetMemHandle", 4010, 0, cuIpcGetMemHandle),
    ENTRY("cuIpcOpenMemHandle", 11000, 0, cuIpcOpenMemHandle_v2),
    ENTRY("cuIpcOpenMemHandle", 4010, 0, cuIpcOpenMemHandle),
    ENTRY("cuIpcCloseMemHandle", 4010, 0, cuIpcCloseMemHandle),
    ENTRY("cuCtxEnablePeerAccess", 4000, 0, cuCtxEnablePeerAccess),
    ENTRY("cuCtxDisablePeerAccess", 4000, 0, cuCtxDisablePeerAccess),
    ENTRY("cuStreamBeginCapture", 10010, 0, cuStreamBeginCapture_v2),
    ENTRY("cuStreamBeginCapture", 10010, 1, cuStreamBeginCapture_v2_ptsz),
    ENTRY("cuStreamBeginCaptureToGraph", 12030, 0, cuStreamBeginCaptureToGraph),
    ENTRY("cuStreamBeginCaptureToGraph", 12030, 1, cuStreamBeginCaptureToGraph_ptsz),
    ENTRY("cuStreamEndCapture", 10000, 0, cuStreamEndCapture),
    ENTRY("cuStreamEndCapture", 10000, 1, cuStreamEndCapture_ptsz),
    ENTRY("cuGetProcAddress", 12000, 0, cuGetProcAddress_v2),
    ENTRY("cuGetProcAddress", 11030, 0, cuGetProcAddress),
};
#undef ENTRY
#define ENTRY_COUNT ((int) (sizeof entries / sizeof entries[0]))

/* The entry for a name asked under version and per-thread choice; NULL when vmmkit has none. A
 * function without a per-thread variant (cuMemAlloc) answers both. */
static const struct driver_entry *entry_for(const char *asked, int version, int per_thread) {
    for (int pass = 0; pass < 2; pass++, per_thread = 0) {
        for (int i = 0; i < ENTRY_COUNT; i++) {
            const struct driver_entry *e = &entries[i];
            if (e->per_thread == per_thread && version >= e->since && strcmp(e->asked, asked) == 0) return e;
        }
    }
    return NULL;
}

/* What a lookup by name answers: vmmkit's function, where it has one, for the driver's answer found. */
static void answer(const char *asked, void **pfn, int version, unsigned long long flags) {
    if (!asked || !pfn || !*pfn || strncmp(asked, "cu", 2) != 0) return;
    pthread_once(&real_cu_once, resolve_real_driver);
    /* Per-thread when the program asked for it, or when the driver answered with a _ptsz function. */
    int per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0
        || *pfn == (void *) real_cu.cuMemAllocAsync_ptsz || *pfn == (void *) real_cu.cuMemFreeAsync_ptsz
        || *pfn == (void *) real_cu.cuMemAllocFromPoolAsync_ptsz
        || *pfn == (void *) real_cu.cuStreamBeginCapture_v2_ptsz || *pfn == (void *) real_cu.cuStreamEndCapture_ptsz
        || *pfn == (void *) real_cu.cuStreamBeginCaptureToGraph_ptsz;
    const struct driver_entry *e = entry_for(asked, version, per_thread);
    if (e) *pfn = substitute(e->real_slot, *pfn, e->ours);
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, uint64_t flags) {
    start_java_soon(); /* a runtime initialising asks for the driver's functions */
    CUresult rc = DRIVER(cuGetProcAddress, symbol, pfn, version, flags);
    if (rc == CUDA_SUCCESS && !inside_runtime) answer(symbol, pfn, version, flags);
    return rc;
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags, int *status) {
    start_java_soon();
    CUresult rc = DRIVER(cuGetProcAddress_v2, symbol, pfn, version, flags, status);
    if (rc == CUDA_SUCCESS && !inside_runtime) answer(symbol, pfn, version, flags);
    return rc;
}

EXPORT cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **pfn, unsigned long long flags, int *status) {
    start_java_soon();
    cudaError_t rc = REAL(cudaGetDriverEntryPoint, symbol, pfn, flags, status);
    if (rc == cudaSuccess) answer(symbol, pfn, WITHOUT_VERSION, flags);
    return rc;
}

EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **pfn, unsigned int version,
                                                    unsigned long long flags, int *status) {
    start_java_soon();
    cudaError_t rc = REAL(cudaGetDriverEntryPointByVersion, symbol, pfn, version, flags, status);
    if (rc == cudaSuccess) answer(symbol, pfn, (int) version, flags);
    return rc;
}

void *driver_api_substitute(const char *name, void *library_fn) {
    if (strcmp(name, "cudaGetDriverEntryPoint") == 0)
        return substitute((void **) &real.cudaGetDriverEntryPoint, library_fn, (void *) cudaGetDriverEntryPoint);
    if (strcmp(name, "cudaGetDriverEntryPointByVersion") == 0)
        return substitute((void **) &real.cudaGetDriverEntryPointByVersion, library_fn,
                          (void *) cudaGetDriverEntryPointByVersion);
    for (int i = 0; i < ENTRY_COUNT; i++)
        if (strcmp(entries[i].exported, name) == 0) return substitute(entries[i].real_slot, library_fn, entries[i].ours);
    return NULL;
}
