/*
 * runtime_api.c: the CUDA runtime functions vmmkit exports in place of libcudart's.
 *
 * Several devices and processes: peer access (cudaDeviceEnablePeerAccess/DisablePeerAccess) goes to
 * the real runtime first and, once it agreed, to vmmkit, which grants or revokes the peer on every
 * mapping of the peer device's allocator. IPC of vmmkit pointers (cudaIpcGetMemHandle/OpenMemHandle/
 * CloseMemHandle) is vmmkit's own: its handles carry a magic; other handles and pointers go to the
 * runtime. Cross-device copies (cudaMemcpyPeer[Async], cudaMemcpy with cudaMemcpyDefault) need
 * nothing: vmmkit memory lives in the unified address space, so the runtime copies it as it is.
 * The driver API counterparts (cuCtxEnablePeerAccess, cuIpc*) are in driver_api.c.
 *
 * Managed memory (cudaMallocManaged) and pinned host memory (cudaMallocHost, cudaHostAlloc) stay
 * with CUDA: they are not device memory vmmkit could map.
 */
#include "shim.h"

#include <string.h>
#include <sys/types.h>

/* ---- Exported CUDA runtime functions ----------------------------------------------------- */

EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size) {
    int rc = vmmkit_malloc(devPtr, size, -1, NULL);
    return rc != CALL_REAL ? rc : served_by_runtime(REAL(cudaMalloc, devPtr, size), devPtr, size, NULL);
}

EXPORT cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t stream) {
    int rc = vmmkit_malloc_on_stream(devPtr, size, -1, stream);
    return rc != CALL_REAL ? rc
        : served_by_runtime(REAL(cudaMallocAsync, devPtr, size, stream), devPtr, size, stream);
}

/* The real cudaFree waits for the whole device; vmmkit instead promises (DEVICE_WIDE_STREAM)
 * never to reuse the memory before earlier work on any stream has finished. */
EXPORT cudaError_t cudaFree(void *devPtr) {
    int rc = vmmkit_free(devPtr, -1, DEVICE_WIDE_STREAM);
    return rc != CALL_REAL ? rc : freed_by_runtime(REAL(cudaFree, devPtr));
}

EXPORT cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t stream) {
    int rc = vmmkit_free_on_stream(devPtr, -1, stream);
    return rc != CALL_REAL ? rc : freed_by_runtime(REAL(cudaFreeAsync, devPtr, stream));
}

static int width_fits(size_t width) {
    return width <= SIZE_MAX / 2;
}

/* Pitched allocations: rows of pitch_of(width) bytes (driver_api.c), served as one allocation. */
EXPORT cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height) {
    if (pitch && width > 0 && height > 0 && width_fits(width) && height <= SIZE_MAX / pitch_of(width)) {
        int rc = vmmkit_malloc(devPtr, pitch_of(width) * height, -1, NULL);
        if (rc == cudaSuccess) *pitch = pitch_of(width);
        if (rc != CALL_REAL) return rc;
    }
    cudaError_t rc = REAL(cudaMallocPitch, devPtr, pitch, width, height);
    return served_by_runtime(rc, devPtr, rc == cudaSuccess && pitch ? *pitch * height : 0, NULL);
}

/* extent.width is in bytes; depth slices of height rows each. */
EXPORT cudaError_t cudaMalloc3D(cudaPitchedPtr *pitched, cudaExtent extent) {
    size_t rows = extent.height * extent.depth;
    if (pitched && extent.width > 0 && extent.height > 0 && extent.depth > 0 && width_fits(extent.width)
            && rows / extent.depth == extent.height && rows <= SIZE_MAX / pitch_of(extent.width)) {
        void *ptr = NULL;
        int rc = vmmkit_malloc(&ptr, pitch_of(extent.width) * rows, -1, NULL);
        if (rc == cudaSuccess) *pitched = (cudaPitchedPtr) { ptr, pitch_of(extent.width), extent.width, extent.height };
        if (rc != CALL_REAL) return rc;
    }
    cudaError_t rc = REAL(cudaMalloc3D, pitched, extent);
    return served_by_runtime(rc, pitched ? &pitched->ptr : NULL, rc == cudaSuccess ? pitched->pitch * rows : 0, NULL);
}

/* With VMM_ZERO_COPY=1, a device-to-device copy (or cudaMemcpyDefault) between two vmmkit
 * allocations is offered to Java first (seed: VmmOptimizer). Java remaps the pages when the copy is
 * a whole-buffer resize, the cost model favours it and the stream's earlier work is done; otherwise,
 * and for every other copy, the real runtime copies. cudaSuccess or a cudaError when Java decided
 * the copy (a remap that failed twice leaves the destination without pages: no copy may go there),
 * CALL_REAL when the runtime must copy. */
static int remapped(void *dst, const void *src, size_t count, int kind, cudaStream_t stream) {
    if (!zero_copy || count == 0 || count > INT64_MAX) return CALL_REAL;
    if (kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault) return CALL_REAL;
    if (!java_up() || monitor_mode) return CALL_REAL;
    if (runtime_stream_captures(stream, 0)) return CALL_REAL; /* a captured copy runs when the graph does: copied */
    int32_t rc = java.remap_copy((int64_t) (intptr_t) dst, (int64_t) (intptr_t) src, (int64_t) count, current_device(),
                                 (int64_t) (intptr_t) stream);
    if (rc == JAVA_REMAPPED) return cudaSuccess;
    return rc < 0 ? -rc : CALL_REAL;
}

EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, int kind) {
    int rc = remapped(dst, src, count, kind, NULL);
    if (rc != CALL_REAL) return rc;
    return REAL(cudaMemcpy, dst, src, count, kind);
}

EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, int kind, cudaStream_t stream) {
    int rc = remapped(dst, src, count, kind, stream);
    if (rc != CALL_REAL) return rc;
    return REAL(cudaMemcpyAsync, dst, src, count, kind, stream);
}

/* ---- vmmkit_realloc ---------------------------------------------------------------------
 * realloc for device memory: the contents are kept up to the smaller size; the pointer stays the
 * same when the allocation shrinks or grows in place, and may change otherwise (the old one is then
 * freed as cudaFree frees). Defined cases:
 *   devPtr == NULL                    -> cudaErrorInvalidValue
 *   *devPtr == NULL                   -> as cudaMalloc(devPtr, size)
 *   size == 0                         -> cudaErrorInvalidValue, nothing changes (free with cudaFree)
 *   a pointer vmmkit did not hand out -> cudaErrorInvalidValue, nothing changes
 *   no memory for the new size        -> cudaErrorMemoryAllocation, the old allocation is unchanged */
EXPORT cudaError_t vmmkit_realloc(void **devPtr, size_t size) {
    if (!devPtr || size == 0) return cudaErrorInvalidValue;
    if (!*devPtr) return cudaMalloc(devPtr, size);
    if (!java_up() || monitor_mode) return cudaErrorInvalidValue; /* vmmkit handed out nothing */
    if (size > INT64_MAX) return cudaErrorMemoryAllocation;
    int64_t result = java.reallocate((int64_t) (intptr_t) *devPtr, (int64_t) size, current_device(), DEVICE_WIDE_STREAM);
    if (result < 0) return (int) -result;
    *devPtr = (void *) (intptr_t) result;
    return cudaSuccess;
}

/* ---- Peer access and IPC ------------------------------------------------------------------ */

/* The runtime keeps its own memory's peer state; vmmkit follows only once the runtime agreed, and
 * if vmmkit cannot grant, the runtime's grant is taken back so that both stay in step. */
EXPORT cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags) {
    cudaError_t rc = REAL(cudaDeviceEnablePeerAccess, peerDevice, flags);
    if (rc != cudaSuccess || !java_up() || monitor_mode) return rc;
    int32_t result = java.peer_access(current_device(), peerDevice, 1);
    if (result == 0) return cudaSuccess;
    REAL(cudaDeviceDisablePeerAccess, peerDevice);
    return -result;
}

EXPORT cudaError_t cudaDeviceDisablePeerAccess(int peerDevice) {
    cudaError_t rc = REAL(cudaDeviceDisablePeerAccess, peerDevice);
    if (rc == cudaSuccess && java_up() && !monitor_mode) {
        int32_t result = java.peer_access(current_device(), peerDevice, 0);
        if (result != 0) return -result;
    }
    return rc;
}

EXPORT cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr) {
    if (handle && devPtr && java_up() && !monitor_mode) {
        int32_t result = java.ipc_get_handle((int64_t) (intptr_t) devPtr, current_device(), (int64_t) (intptr_t) handle);
        if (result != JAVA_NOT_OURS) return result == 0 ? cudaSuccess : -result;
    }
    return REAL(cudaIpcGetMemHandle, handle, devPtr);
}

static int is_vmmkit_handle(const cudaIpcMemHandle_t *handle) {
    uint64_t magic;
    memcpy(&magic, handle->reserved, sizeof magic);
    return magic == VMMKIT_IPC_MAGIC;
}

/* The flags (cudaIpcMemLazyEnablePeerAccess) need nothing from vmmkit: the pages are mapped for the
 * current device and the peers its allocator granted. */
EXPORT cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle, unsigned int flags) {
    if (devPtr && is_vmmkit_handle(&handle) && java_up() && !monitor_mode) {
        int64_t result = java.ipc_open((int64_t) (intptr_t) &handle, current_device());
        if (result != JAVA_PASS_THROUGH) {
            if (result < 0) return (cudaError_t) -result;
            *devPtr = (void *) (intptr_t) result;
            return cudaSuccess;
        }
    }
    return REAL(cudaIpcOpenMemHandle, devPtr, handle, flags);
}

EXPORT cudaError_t cudaIpcCloseMemHandle(void *devPtr) {
    if (devPtr && java_up() && !monitor_mode) {
        int32_t result = java.ipc_close((int64_t) (intptr_t) devPtr);
        if (result == JAVA_FREED) return cudaSuccess;
        if (result != JAVA_NOT_OURS) return -result;
    }
    return REAL(cudaIpcCloseMemHandle, devPtr);
}

/* ---- PyTorch CUDAPluggableAllocator ------------------------------------------------------ */

EXPORT void *vmmkit_torch_alloc(ssize_t size, int device, cudaStream_t stream) {
    void *ptr = NULL;
    if (size < 0) return NULL;
    int rc = vmmkit_malloc_on_stream(&ptr, (size_t) size, device, stream);
    if (rc == CALL_REAL) rc = served_by_runtime(REAL(cudaMallocAsync, &ptr, (size_t) size, stream), &ptr, size, stream);
    return rc == cudaSuccess ? ptr : NULL;
}

EXPORT void vmmkit_torch_free(void *ptr, ssize_t size, int device, cudaStream_t stream) {
    (void) size;
    if (vmmkit_free_on_stream(ptr, device, stream) == CALL_REAL && ptr)
        freed_by_runtime(REAL(cudaFreeAsync, ptr, stream));
}

/* The pair a torch.cuda.MemPool's allocator calls for the pool's segments (python/vmmkit serving the
 * tags only). PyTorch's caching allocator owns a segment, and hands its blocks out on any stream,
 * also to a CUDA graph capturing into the pool: so a segment is allocated and freed as cudaMalloc
 * and cudaFree do, never left to CUDA as a graph's own node when the current stream captures. */
EXPORT void *vmmkit_pool_alloc(ssize_t size, int device, cudaStream_t stream) {
    (void) stream;
    void *ptr = NULL;
    if (size < 0) return NULL;
    int rc = vmmkit_malloc(&ptr, (size_t) size, device, NULL);
    if (rc == CALL_REAL) rc = served_by_runtime(REAL(cudaMalloc, &ptr, (size_t) size), &ptr, size, NULL);
    return rc == cudaSuccess ? ptr : NULL;
}

EXPORT void vmmkit_pool_free(void *ptr, ssize_t size, int device, cudaStream_t stream) {
    (void) size; (void) stream;
    if (vmmkit_free(ptr, device, DEVICE_WIDE_STREAM) == CALL_REAL && ptr) freed_by_runtime(REAL(cudaFree, ptr));
}

/* ---- Lookups by handle --------------------------------------------------------------------- */

void *runtime_api_substitute(const char *name, void *runtime_fn) {
#define OURS(fn) if (strcmp(name, #fn) == 0) return substitute((void **) &real.fn, runtime_fn, (void *) fn)
    OURS(cudaMalloc); OURS(cudaFree); OURS(cudaMallocAsync); OURS(cudaFreeAsync);
    OURS(cudaMemcpy); OURS(cudaMemcpyAsync);
    OURS(cudaDeviceEnablePeerAccess); OURS(cudaDeviceDisablePeerAccess);
    OURS(cudaIpcGetMemHandle); OURS(cudaIpcOpenMemHandle); OURS(cudaIpcCloseMemHandle);
    OURS(cudaMallocPitch); OURS(cudaMalloc3D);
#undef OURS
    return NULL;
}
