/*
 * driver_api.c: the CUDA driver functions vmmkit exports in place of libcuda's.
 *
 * JAX/XLA, CuPy's own calls, numba-cuda and any program with a statically linked runtime get device
 * memory through the driver API. Its allocation calls are served as the runtime's are; the queries
 * programs make about one allocation (cuMemGetAddressRange, the range attributes of
 * cuPointerGetAttribute[s]) answer with the vmmkit allocation holding the pointer, where the driver
 * alone would answer with one handle's mapping; IPC and peer access follow the runtime calls.
 *
 * The device is the one of the calling thread's current context; without one the real driver
 * answers (CUDA_ERROR_INVALID_CONTEXT, as the program expects). Calls the real runtime makes while
 * it serves a call vmmkit passed through (inside_runtime) go straight to the driver.
 */
#include "shim.h"

#include <stdio.h>
#include <string.h>

#define CU_STREAM_PER_THREAD ((CUstream) 0x2)
#define MAX_DEVICES 64 /* as many as DeviceManagers holds */
enum {
    CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,
    CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12,
};

/* The device of the calling thread's current context, or -1 when there is none. */
static int context_device(void) {
    CUdevice device;
    return DRIVER(cuCtxGetDevice, &device) == CUDA_SUCCESS ? device : -1;
}

/* True when vmmkit may decide this driver call (else: straight to the driver). */
static int ours_to_decide(void) {
    return !inside_runtime && java_up() && !monitor_mode;
}

/* After the driver served an allocation call: count it, and record it in monitor mode. */
static CUresult served_by_driver(CUresult rc, CUdeviceptr *ptr, size_t size, CUstream stream) {
    if (inside_runtime) return rc; /* the runtime's call counted it */
    __atomic_fetch_add(&passthrough_calls, 1, __ATOMIC_RELAXED);
    if (rc == CUDA_SUCCESS && ptr && *ptr && monitor_mode && java_up())
        java.record_alloc((int64_t) *ptr, (int64_t) size, (int64_t) (intptr_t) stream);
    return rc;
}

static CUresult freed_by_driver(CUresult rc) {
    if (!inside_runtime) __atomic_fetch_add(&passthrough_calls, 1, __ATOMIC_RELAXED);
    return rc;
}

/* CALL_REAL when device is -1, else the result of vmmkit serving the allocation on device. */
static int malloc_on(int device, CUdeviceptr *ptr, size_t size, CUstream stream) {
    if (device < 0) return CALL_REAL;
    void *address = NULL;
    int rc = vmmkit_malloc(ptr ? &address : NULL, size, device, stream);
    if (rc == cudaSuccess) *ptr = (CUdeviceptr) (uintptr_t) address;
    return rc;
}

/* CALL_REAL, or the result of vmmkit serving the allocation on the current context's device. */
static int driver_malloc(CUdeviceptr *ptr, size_t size, CUstream stream) {
    return malloc_on(ours_to_decide() ? context_device() : -1, ptr, size, stream);
}

static int driver_free(CUdeviceptr ptr, int64_t stream) {
    if (inside_runtime || !ptr || !java_up()) return CALL_REAL;
    int device = monitor_mode ? 0 : context_device();
    return device < 0 ? CALL_REAL : vmmkit_free((void *) (uintptr_t) ptr, device, stream);
}

/* ---- Allocation ------------------------------------------------------------------------------ */

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    int rc = driver_malloc(dptr, bytesize, NULL);
    return rc != CALL_REAL ? rc : served_by_driver(DRIVER(cuMemAlloc_v2, dptr, bytesize), dptr, bytesize, NULL);
}

/* As cudaFree: ordered after earlier work on every stream (DEVICE_WIDE_STREAM). */
EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    int rc = driver_free(dptr, DEVICE_WIDE_STREAM);
    return rc != CALL_REAL ? rc : freed_by_driver(DRIVER(cuMemFree_v2, dptr));
}

/* The per-thread default stream variants: stream 0 means this thread's default stream. */
static CUstream per_thread(CUstream stream) {
    return stream ? stream : CU_STREAM_PER_THREAD;
}

/* Stream-ordered calls: on a capturing stream the graph's, as vmmkit_malloc_on_stream and
 * vmmkit_free_on_stream say (allocation.c). per_thread_stream: a _ptsz entry point's. The stream is
 * asked only where vmmkit would serve the call: not for a call the runtime makes while serving one
 * vmmkit passed through (that call's stream was asked already), nor for a pool of the program's. */
static int malloc_on_stream(int device, CUdeviceptr *ptr, size_t size, CUstream stream, int per_thread_stream) {
    if (device >= 0 && driver_stream_captures(stream, per_thread_stream)) device = -1;
    return malloc_on(device, ptr, size, per_thread_stream ? per_thread(stream) : stream);
}

static int driver_malloc_on_stream(CUdeviceptr *ptr, size_t size, CUstream stream, int per_thread_stream) {
    return malloc_on_stream(ours_to_decide() ? context_device() : -1, ptr, size, stream, per_thread_stream);
}

static int driver_free_on_stream(CUdeviceptr ptr, CUstream stream, int per_thread_stream) {
    if (inside_runtime) return CALL_REAL;
    CUstream ordered = per_thread_stream ? per_thread(stream) : stream;
    return driver_free(ptr, driver_stream_captures(stream, per_thread_stream) ? DEVICE_WIDE_STREAM : (int64_t) (intptr_t) ordered);
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream) {
    int rc = driver_malloc_on_stream(dptr, bytesize, stream, 0);
    return rc != CALL_REAL ? rc
        : served_by_driver(DRIVER(cuMemAllocAsync, dptr, bytesize, stream), dptr, bytesize, stream);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
    int rc = driver_free_on_stream(dptr, stream, 0);
    return rc != CALL_REAL ? rc : freed_by_driver(DRIVER(cuMemFreeAsync, dptr, stream));
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream stream) {
    int rc = driver_malloc_on_stream(dptr, bytesize, stream, 1);
    return rc != CALL_REAL ? rc
        : served_by_driver(DRIVER(cuMemAllocAsync_ptsz, dptr, bytesize, stream), dptr, bytesize, per_thread(stream));
}

EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
    int rc = driver_free_on_stream(dptr, stream, 1);
    return rc != CALL_REAL ? rc : freed_by_driver(DRIVER(cuMemFreeAsync_ptsz, dptr, stream));
}

/* The pitch CUDA gives a pitched allocation: the width rounded up to 512 bytes (runtime_api.c's
 * cudaMallocPitch and cudaMalloc3D use it too). */
size_t pitch_of(size_t width) {
    return (width + PITCH_ALIGNMENT - 1) & ~(size_t) (PITCH_ALIGNMENT - 1);
}

/* The driver accepts element sizes of 4, 8 and 16 bytes only. */
EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height, unsigned int element) {
    if (!inside_runtime && dptr && pitch && (element == 4 || element == 8 || element == 16) && width > 0 && height > 0
            && width <= SIZE_MAX / 2 && height <= SIZE_MAX / pitch_of(width)) {
        int rc = driver_malloc(dptr, pitch_of(width) * height, NULL);
        if (rc == CUDA_SUCCESS) *pitch = pitch_of(width);
        if (rc != CALL_REAL) return rc;
    }
    CUresult rc = DRIVER(cuMemAllocPitch_v2, dptr, pitch, width, height, element);
    return served_by_driver(rc, dptr, rc == CUDA_SUCCESS && pitch ? *pitch * height : 0, NULL);
}

/* The current context's device when pool is its default memory pool, else -1. cuMemAllocAsync takes
 * from that pool unless the program set another, so an allocation asked of it is cuMemAllocAsync's
 * request by another name (XLA's cuda_async allocator asks this way) and vmmkit serves it. The
 * default pool of a device never changes: it is asked once. */
static int default_pool_device(void *pool) {
    static void *default_pools[MAX_DEVICES];
    if (!pool || !ours_to_decide()) return -1;
    int device = context_device();
    if (device < 0 || device >= MAX_DEVICES) return -1;
    void *known = __atomic_load_n(&default_pools[device], __ATOMIC_ACQUIRE);
    if (!known) {
        if (DRIVER(cuDeviceGetDefaultMemPool, &known, device) != CUDA_SUCCESS || !known) return -1;
        __atomic_store_n(&default_pools[device], known, __ATOMIC_RELEASE);
    }
    return known == pool ? device : -1;
}

/* A pool the program made has its own properties (IPC, location, release threshold) that vmmkit
 * cannot honour: the driver serves these, and vmmkit says so once. */
static void pool_warning(void) {
    static int said;
    if (!inside_runtime && !monitor_mode && !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
        fprintf(stderr, "vmmkit: cuMemAllocFromPoolAsync: allocations from the program's own memory pools are "
                        "served by CUDA, not vmmkit\n");
}

/* Served by vmmkit when pool is the default one and stream does not capture (the graph's, as in
 * cuMemAllocAsync); a pool of the program's own is said once. */
static int pool_malloc(void *pool, CUdeviceptr *dptr, size_t bytesize, CUstream stream, int per_thread_stream) {
    int device = default_pool_device(pool);
    int rc = malloc_on_stream(device, dptr, bytesize, stream, per_thread_stream);
    if (rc == CALL_REAL && device < 0) pool_warning();
    return rc;
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, void *pool, CUstream stream) {
    int rc = pool_malloc(pool, dptr, bytesize, stream, 0);
    if (rc != CALL_REAL) return rc;
    return served_by_driver(DRIVER(cuMemAllocFromPoolAsync, dptr, bytesize, pool, stream), dptr, bytesize, stream);
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, void *pool, CUstream stream) {
    int rc = pool_malloc(pool, dptr, bytesize, stream, 1);
    if (rc != CALL_REAL) return rc;
    return served_by_driver(DRIVER(cuMemAllocFromPoolAsync_ptsz, dptr, bytesize, pool, stream), dptr, bytesize,
                            per_thread(stream));
}

/* ---- Questions about one allocation ----------------------------------------------------------- */

/* True, with the start and size of the vmmkit allocation holding ptr, when there is one. */
static int vmmkit_range(CUdeviceptr ptr, CUdeviceptr *base, size_t *size) {
    if (!ptr || !ours_to_decide()) return 0;
    int64_t range[2];
    int device = context_device();
    if (java.address_range((int64_t) ptr, device < 0 ? 0 : device, (int64_t) (intptr_t) range) != 0) return 0;
    *base = (CUdeviceptr) range[0];
    *size = (size_t) range[1];
    return 1;
}

EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) {
    CUdeviceptr base;
    size_t size;
    if (!vmmkit_range(dptr, &base, &size)) return DRIVER(cuMemGetAddressRange_v2, pbase, psize, dptr);
    if (pbase) *pbase = base;
    if (psize) *psize = size;
    return CUDA_SUCCESS;
}

/* Every attribute is the driver's (device, memory type, ...) but the range, which is the allocation's. */
EXPORT CUresult cuPointerGetAttribute(void *data, int attribute, CUdeviceptr ptr) {
    CUresult rc = DRIVER(cuPointerGetAttribute, data, attribute, ptr);
    CUdeviceptr base;
    size_t size;
    if (rc != CUDA_SUCCESS || !data) return rc;
    if (attribute == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR && vmmkit_range(ptr, &base, &size)) *(CUdeviceptr *) data = base;
    if (attribute == CU_POINTER_ATTRIBUTE_RANGE_SIZE && vmmkit_range(ptr, &base, &size)) *(size_t *) data = size;
    return rc;
}

/* Runtimes and libraries ask for a pointer's memory type and device on their hot paths: only a
 * question about the range costs a look into vmmkit's allocations. */
static int asks_for_range(unsigned int count, const int *attributes, void *const *data) {
    for (unsigned int i = 0; i < count; i++) {
        if (data[i] && (attributes[i] == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR || attributes[i] == CU_POINTER_ATTRIBUTE_RANGE_SIZE)) return 1;
    }
    return 0;
}

EXPORT CUresult cuPointerGetAttributes(unsigned int count, int *attributes, void **data, CUdeviceptr ptr) {
    CUresult rc = DRIVER(cuPointerGetAttributes, count, attributes, data, ptr);
    CUdeviceptr base;
    size_t size;
    if (rc != CUDA_SUCCESS || !attributes || !data || !asks_for_range(count, attributes, data)
            || !vmmkit_range(ptr, &base, &size)) return rc;
    for (unsigned int i = 0; i < count; i++) {
        if (!data[i]) continue;
        if (attributes[i] == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR) *(CUdeviceptr *) data[i] = base;
        if (attributes[i] == CU_POINTER_ATTRIBUTE_RANGE_SIZE) *(size_t *) data[i] = size;
    }
    return rc;
}

/* ---- IPC and peer access (as the runtime calls in runtime_api.c) ------------------------------ */

EXPORT CUresult cuIpcGetMemHandle(cudaIpcMemHandle_t *handle, CUdeviceptr dptr) {
    int device = handle && dptr && ours_to_decide() ? context_device() : -1;
    if (device >= 0) {
        int32_t result = java.ipc_get_handle((int64_t) dptr, device, (int64_t) (intptr_t) handle);
        if (result != JAVA_NOT_OURS) return result == 0 ? CUDA_SUCCESS : -result;
    }
    return DRIVER(cuIpcGetMemHandle, handle, dptr);
}

/* CUDA_SUCCESS, a CUresult, or CALL_REAL for a handle vmmkit did not make. */
static int vmmkit_ipc_open(CUdeviceptr *dptr, cudaIpcMemHandle_t *handle) {
    uint64_t magic;
    memcpy(&magic, handle->reserved, sizeof magic);
    int device = dptr && magic == VMMKIT_IPC_MAGIC && ours_to_decide() ? context_device() : -1;
    if (device < 0) return CALL_REAL;
    int64_t result = java.ipc_open((int64_t) (intptr_t) handle, device);
    if (result == JAVA_PASS_THROUGH) return CALL_REAL;
    if (result < 0) return (int) -result;
    *dptr = (CUdeviceptr) result;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *dptr, cudaIpcMemHandle_t handle, unsigned int flags) {
    int rc = vmmkit_ipc_open(dptr, &handle);
    return rc != CALL_REAL ? rc : DRIVER(cuIpcOpenMemHandle_v2, dptr, handle, flags);
}

EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr *dptr, cudaIpcMemHandle_t handle, unsigned int flags) {
    int rc = vmmkit_ipc_open(dptr, &handle);
    return rc != CALL_REAL ? rc : DRIVER(cuIpcOpenMemHandle, dptr, handle, flags);
}

EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
    if (dptr && ours_to_decide()) {
        int32_t result = java.ipc_close((int64_t) dptr);
        if (result == JAVA_FREED) return CUDA_SUCCESS;
        if (result != JAVA_NOT_OURS) return -result;
    }
    return DRIVER(cuIpcCloseMemHandle, dptr);
}

/* The device of a context: made current for the question, then the caller's is restored. */
static int device_of(CUcontext context) {
    CUcontext previous;
    if (DRIVER(cuCtxPushCurrent_v2, context) != CUDA_SUCCESS) return -1;
    int device = context_device();
    DRIVER(cuCtxPopCurrent_v2, &previous);
    return device;
}

/* The current context's device gets access to the peer context's memory: the driver first, then
 * vmmkit's mappings of the peer's device; if vmmkit cannot grant, the driver's grant is taken back. */
EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
    CUresult rc = DRIVER(cuCtxEnablePeerAccess, peer, flags);
    if (rc != CUDA_SUCCESS || !ours_to_decide()) return rc;
    int device = context_device(), peer_device = device_of(peer);
    if (device < 0 || peer_device < 0) return rc;
    int32_t result = java.peer_access(device, peer_device, 1);
    if (result == 0) return CUDA_SUCCESS;
    DRIVER(cuCtxDisablePeerAccess, peer);
    return -result;
}

EXPORT CUresult cuCtxDisablePeerAccess(CUcontext peer) {
    CUresult rc = DRIVER(cuCtxDisablePeerAccess, peer);
    if (rc != CUDA_SUCCESS || !ours_to_decide()) return rc;
    int device = context_device(), peer_device = device_of(peer);
    if (device < 0 || peer_device < 0) return rc;
    int32_t result = java.peer_access(device, peer_device, 0);
    return result == 0 ? rc : -result;
}
