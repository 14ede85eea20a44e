/*
 * allocation.c: the two decisions of every allocation call, serve it with vmmkit or forward it to
 * the real runtime (CALL_REAL), and the bookkeeping of calls the runtime served.
 */
#include "shim.h"

int vmmkit_malloc(void **ptr, size_t size, int device, cudaStream_t stream) {
    if (!java_up() || monitor_mode) return CALL_REAL;
    if (!ptr) return cudaErrorInvalidValue;
    if (size == 0) { *ptr = NULL; return cudaSuccess; }
    if (size > INT64_MAX) return cudaErrorMemoryAllocation;
    int64_t result = java.allocate((int64_t) size, device < 0 ? current_device() : device,
                                   (int64_t) (intptr_t) stream);
    if (result == JAVA_PASS_THROUGH) return CALL_REAL;
    if (result < 0) return (int) -result;
    *ptr = (void *) (intptr_t) result;
    return cudaSuccess;
}

int vmmkit_free(void *ptr, int device, int64_t stream) {
    if (!ptr) { /* cudaFree(NULL): CUDA's idiom for initialising the runtime */
        start_java_soon();
        return CALL_REAL;
    }
    if (!java_up()) return CALL_REAL;
    if (monitor_mode) {
        java.record_free((int64_t) (intptr_t) ptr, stream); /* before: the address may be reused */
        return CALL_REAL;
    }
    /* device -1: Java finds the owner by address, so a free makes no cudaGetDevice (about 100 ns on a GPU). */
    int32_t result = java.release((int64_t) (intptr_t) ptr, device, stream);
    return result == JAVA_NOT_OURS ? CALL_REAL : result == JAVA_FREED ? cudaSuccess : -result;
}

/* Stream-ordered calls (cudaMallocAsync, cudaFreeAsync, the pluggable pair). On a capturing stream
 * an allocation and a free are the graph's own nodes, run each time the graph runs: the allocation
 * is CUDA's, and a vmmkit block freed there is freed as cudaFree frees it (the graph's reads of it
 * happen when it runs, which vmmkit cannot see; the synchronisation waits for the capture's end). */
int vmmkit_malloc_on_stream(void **ptr, size_t size, int device, cudaStream_t stream) {
    return runtime_stream_captures(stream, 0) ? CALL_REAL : vmmkit_malloc(ptr, size, device, stream);
}

int vmmkit_free_on_stream(void *ptr, int device, cudaStream_t stream) {
    return vmmkit_free(ptr, device, runtime_stream_captures(stream, 0) ? DEVICE_WIDE_STREAM : (int64_t) (intptr_t) stream);
}

cudaError_t served_by_runtime(cudaError_t rc, void **ptr, size_t size, cudaStream_t stream) {
    __atomic_fetch_add(&passthrough_calls, 1, __ATOMIC_RELAXED);
    if (rc == cudaSuccess && ptr && *ptr && monitor_mode && java_up())
        java.record_alloc((int64_t) (intptr_t) *ptr, (int64_t) size, (int64_t) (intptr_t) stream);
    return rc;
}

cudaError_t freed_by_runtime(cudaError_t rc) {
    __atomic_fetch_add(&passthrough_calls, 1, __ATOMIC_RELAXED);
    return rc;
}
