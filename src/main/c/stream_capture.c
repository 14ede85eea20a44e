/*
 * stream_capture.c: stream captures (CUDA graphs being recorded) told to vmmkit.
 *
 * A device synchronisation from any thread while a stream of the device is capturing invalidates
 * the capture, whatever its mode, and the graph fails at its end. vmmkit synchronises the device in
 * the background for memory freed with cudaFree, so it must know: a capture's begin waits for such
 * a synchronisation in progress and is counted (java.capture_changed(1)), and no synchronisation
 * runs until every capture counted has ended (java.capture_changed(0)). A capture has ended when
 * cudaStreamEndCapture succeeded, or its stream no longer captures after the call (an invalidated
 * capture ends with an error). The runtime's calls and the driver's (XLA, CuPy and
 * numba capture through the driver API) are both told; a driver call the runtime makes while it
 * serves one of ours (inside_runtime) was told already. cuStreamBeginCapture's first version
 * (CUDA 10.0, no mode) is not: it is asked for under versions before 10.1 only.
 *
 * Loaded as PyTorch's pluggable allocator (dlopen, not preloaded) the shim sees no capture call, so
 * it exports vmmkit_capture_begin and vmmkit_capture_end (include/vmmkit/vmmkit.h): the program
 * tells vmmkit itself.
 *
 * Stream-ordered allocations and frees on a capturing stream become the graph's own allocation and
 * free nodes, which take effect each time the graph runs: runtime_stream_captures and
 * driver_stream_captures tell the allocation calls so, and they leave those to CUDA (a vmmkit block
 * freed there is freed as cudaFree frees it, reused only after a synchronisation once the capture
 * has ended). The streams are asked only while a capture is counted here.
 */
#include "shim.h"

#include <string.h>

#define CAPTURE_STATUS_NONE 0

static int captures_under_way; /* begun and not ended; never below 0, whatever ends a program tells */

static void count_capture(int began) {
    if (began) {
        __atomic_add_fetch(&captures_under_way, 1, __ATOMIC_ACQ_REL);
        return;
    }
    int count = __atomic_load_n(&captures_under_way, __ATOMIC_ACQUIRE);
    while (count > 0 && !__atomic_compare_exchange_n(&captures_under_way, &count, count - 1, 0,
                                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    }
}

static void told(int began) {
    if (inside_runtime) return;
    count_capture(began);
    if (serving() && java.capture_changed) java.capture_changed(began);
}

/* True unless the stream surely does not capture. A failed query counts as capturing: before the
 * end call it keeps a stream the runtime refuses to answer for (the legacy stream beside another
 * capture) from being uncounted; after a failed end call, the capture stays counted. */
static int runtime_capturing(cudaStream_t stream, int per_thread) {
    int status = CAPTURE_STATUS_NONE;
    cudaError_t rc = per_thread ? REAL(cudaStreamIsCapturing_ptsz, stream, &status)
                                : REAL(cudaStreamIsCapturing, stream, &status);
    return rc != cudaSuccess || status != CAPTURE_STATUS_NONE;
}

static int driver_capturing(CUstream stream, int per_thread) {
    int status = CAPTURE_STATUS_NONE;
    CUresult rc = per_thread ? DRIVER(cuStreamIsCapturing_ptsz, stream, &status)
                             : DRIVER(cuStreamIsCapturing, stream, &status);
    return rc != CUDA_SUCCESS || status != CAPTURE_STATUS_NONE;
}

int runtime_stream_captures(cudaStream_t stream, int per_thread) {
    return __atomic_load_n(&captures_under_way, __ATOMIC_ACQUIRE) > 0 && runtime_capturing(stream, per_thread);
}

int driver_stream_captures(CUstream stream, int per_thread) {
    return __atomic_load_n(&captures_under_way, __ATOMIC_ACQUIRE) > 0 && driver_capturing(stream, per_thread);
}

/* ---- The runtime ------------------------------------------------------------------------- */

/* A begin is told first (it waits for vmmkit's call in progress), and untold when it failed. An end
 * is told when its stream captured before the call and the call succeeded or the stream no longer
 * captures. */
#define BEGIN_RUNTIME(call) do { told(1); cudaError_t rc_ = (call); if (rc_ != cudaSuccess) told(0); return rc_; } while (0)
#define END_RUNTIME(stream, per_thread, call) do { \
        int was_ = !inside_runtime && runtime_capturing(stream, per_thread); \
        cudaError_t rc_ = (call); \
        if (was_ && (rc_ == cudaSuccess || !runtime_capturing(stream, per_thread))) told(0); \
        return rc_; \
    } while (0)

EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t stream, int mode) {
    BEGIN_RUNTIME(REAL(cudaStreamBeginCapture, stream, mode));
}

EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, int mode) {
    BEGIN_RUNTIME(REAL(cudaStreamBeginCapture_ptsz, stream, mode));
}

EXPORT cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t stream, void *graph, const void *dependencies,
                                                 const void *edge_data, size_t count, int mode) {
    BEGIN_RUNTIME(REAL(cudaStreamBeginCaptureToGraph, stream, graph, dependencies, edge_data, count, mode));
}

EXPORT cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t stream, void *graph, const void *dependencies,
                                                      const void *edge_data, size_t count, int mode) {
    BEGIN_RUNTIME(REAL(cudaStreamBeginCaptureToGraph_ptsz, stream, graph, dependencies, edge_data, count, mode));
}

EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t stream, void **graph) {
    END_RUNTIME(stream, 0, REAL(cudaStreamEndCapture, stream, graph));
}

EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, void **graph) {
    END_RUNTIME(stream, 1, REAL(cudaStreamEndCapture_ptsz, stream, graph));
}

/* ---- The driver -------------------------------------------------------------------------- */

#define BEGIN_DRIVER(call) do { told(1); CUresult rc_ = (call); if (rc_ != CUDA_SUCCESS) told(0); return rc_; } while (0)
#define END_DRIVER(stream, per_thread, call) do { \
        int was_ = !inside_runtime && driver_capturing(stream, per_thread); \
        CUresult rc_ = (call); \
        if (was_ && (rc_ == CUDA_SUCCESS || !driver_capturing(stream, per_thread))) told(0); \
        return rc_; \
    } while (0)

EXPORT CUresult cuStreamBeginCapture_v2(CUstream stream, int mode) {
    BEGIN_DRIVER(DRIVER(cuStreamBeginCapture_v2, stream, mode));
}

EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream stream, int mode) {
    BEGIN_DRIVER(DRIVER(cuStreamBeginCapture_v2_ptsz, stream, mode));
}

EXPORT CUresult cuStreamBeginCaptureToGraph(CUstream stream, void *graph, const void *dependencies,
                                            const void *edge_data, size_t count, int mode) {
    BEGIN_DRIVER(DRIVER(cuStreamBeginCaptureToGraph, stream, graph, dependencies, edge_data, count, mode));
}

EXPORT CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream stream, void *graph, const void *dependencies,
                                                 const void *edge_data, size_t count, int mode) {
    BEGIN_DRIVER(DRIVER(cuStreamBeginCaptureToGraph_ptsz, stream, graph, dependencies, edge_data, count, mode));
}

EXPORT CUresult cuStreamEndCapture(CUstream stream, void **graph) {
    END_DRIVER(stream, 0, DRIVER(cuStreamEndCapture, stream, graph));
}

EXPORT CUresult cuStreamEndCapture_ptsz(CUstream stream, void **graph) {
    END_DRIVER(stream, 1, DRIVER(cuStreamEndCapture_ptsz, stream, graph));
}

/* ---- Told by the program ------------------------------------------------------------------ */

static cudaError_t told_by_program(int began) {
    if (!serving() || !java.capture_changed) return cudaErrorNotSupported;
    told(began);
    return cudaSuccess;
}

EXPORT cudaError_t vmmkit_capture_begin(void) {
    return told_by_program(1);
}

EXPORT cudaError_t vmmkit_capture_end(void) {
    return told_by_program(0);
}

/* ---- Lookups by handle --------------------------------------------------------------------- */

void *stream_capture_substitute(const char *name, void *runtime_fn) {
#define OURS(fn) if (strcmp(name, #fn) == 0) return substitute((void **) &real.fn, runtime_fn, (void *) fn)
    OURS(cudaStreamBeginCapture); OURS(cudaStreamBeginCapture_ptsz);
    OURS(cudaStreamBeginCaptureToGraph); OURS(cudaStreamBeginCaptureToGraph_ptsz);
    OURS(cudaStreamEndCapture); OURS(cudaStreamEndCapture_ptsz);
#undef OURS
    return NULL;
}
