/*
 * The native entry point of vmmkit. Loaded with LD_PRELOAD (or as a PyTorch pluggable allocator),
 * the shim intercepts the CUDA runtime's allocation calls and hands them to vmmkit's allocator,
 * which runs in a JVM inside this process.
 *
 * shim.h: what the files of the shim share. Nothing here is exported: the library is built
 * with -fvisibility=hidden and only functions marked EXPORT are seen by the program.
 *
 * The files, one job each:
 *   real_runtime.c   finding the real CUDA runtime's functions
 *   jvm_bootstrap.c  starting (or joining) the JVM that runs vmmkit, and the exit hook
 *   allocation.c     the two decisions: serve with vmmkit, or forward to the real runtime
 *   runtime_api.c    the exported CUDA runtime functions (cudaMalloc, IPC, peer access, ...)
 *   driver_api.c     the exported CUDA driver functions (cuMemAlloc_v2, ranges, IPC, peer access, ...)
 *   entry_points.c   the driver functions a program asks for by name (cuGetProcAddress,
 *                    cudaGetDriverEntryPoint): vmmkit's, where it has one
 *   vmmkit_regions.c the exported memory-tag calls (vmmkit_region_begin/end, vmmkit_default_tag, vmmkit_pause,
 *                    vmmkit_resume) and vmmkit_release_cached
 *   lookups.c        libc's own dlsym, and the exported dlsym and dlvsym, which answer lookups of
 *                    intercepted names by handle
 * A file adding exported functions includes this header; when programs may look its names up by
 * handle, it offers a substitute function that lookups.c asks.
 *
 * No CUDA headers: the few types and values used are declared here, as in CUDA's driver_types.h.
 */
#ifndef VMMKIT_SHIM_H
#define VMMKIT_SHIM_H

#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))

typedef int cudaError_t;
typedef void *cudaStream_t;
enum {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3, /* returned only when no real runtime can be found */
    cudaErrorNotSupported = 801,      /* vmmkit's own entry points, when vmmkit serves no allocation */
    cudaErrorUnknown = 999,
};

/* cudaIpcMemHandle_t: 64 opaque bytes. vmmkit's own handles start with this magic ("VMMKIPC\1"). */
typedef struct { char reserved[64]; } cudaIpcMemHandle_t;
#define VMMKIT_IPC_MAGIC 0x014350494B4D4D56ULL
typedef struct { size_t width, height, depth; } cudaExtent;
typedef struct { void *ptr; size_t pitch, xsize, ysize; } cudaPitchedPtr;
enum { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
       cudaMemcpyDeviceToDevice, cudaMemcpyDefault };

/* The driver API's types (cuda.h), as far as the shim uses them. */
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUstream;
typedef void *CUcontext;
typedef int CUdevice;
enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_NOT_INITIALIZED = 3,
};

/* ---- The table Java fills (layout mirrored by NativeBootstrap.TABLE) ---------------------- */

/* Results of the Java entry points, mirrored by dev.vmmkit.interpose.InterposedCalls. */
#define JAVA_PASS_THROUGH (-1000) /* allocate: vmmkit cannot serve it, use the real runtime */
#define JAVA_FREED 0              /* release: vmmkit took the pointer back */
#define JAVA_NOT_OURS 1           /* release: not a vmmkit pointer, give it to the real runtime */
#define JAVA_REMAPPED 0           /* remap_copy: done by remapping pages, nothing to copy */
#define DEVICE_WIDE_STREAM (-1)   /* cudaFree: ordered after earlier work on every stream */

struct entry_table {
    int32_t table_size;    /* in: sizeof(struct entry_table), so Java refuses a mismatched shim */
    int32_t monitor_mode;  /* in: 1 = memory comes from the real runtime, Java only records */
    int32_t owns_jvm;      /* in: 1 = this shim created the JVM (0: attached to a host JVM) */
    int32_t started_early; /* in: 1 = the start runs in the background, before the program's first allocation */
    /* out: address > 0, 0 for size 0, or -cudaError, or JAVA_PASS_THROUGH */
    int64_t (*allocate)(int64_t size, int32_t device, int64_t stream);
    /* out: JAVA_FREED, JAVA_NOT_OURS or -cudaError */
    int32_t (*release)(int64_t address, int32_t device, int64_t stream);
    void (*record_alloc)(int64_t address, int64_t size, int64_t stream); /* monitor mode */
    void (*record_free)(int64_t address, int64_t stream);                /* monitor mode */
    /* writes stats, trace, and (exit status 0) the peak profile */
    void (*at_exit)(int64_t passthrough_calls, int32_t exit_status);
    /* after the runtime agreed: device gets (enable 1) or loses (0) access to peer's memory; 0 or -cudaError */
    int32_t (*peer_access)(int32_t device, int32_t peer, int32_t enable);
    /* 0 (handle written), JAVA_NOT_OURS, or -cudaError */
    int32_t (*ipc_get_handle)(int64_t address, int32_t device, int64_t handle_out);
    /* pointer, JAVA_PASS_THROUGH (not a vmmkit handle), or -cudaError */
    int64_t (*ipc_open)(int64_t handle_in, int32_t device);
    /* JAVA_FREED, JAVA_NOT_OURS (not opened by vmmkit), or -cudaError */
    int32_t (*ipc_close)(int64_t address);
    /* out: the resized allocation's address, or -cudaError */
    int64_t (*reallocate)(int64_t address, int64_t size, int32_t device, int64_t stream);
    /* out: JAVA_REMAPPED, -cudaError (the remap left the destination without pages), or anything else: make the copy */
    int32_t (*remap_copy)(int64_t dst, int64_t src, int64_t count, int32_t device, int64_t stream);
    /* the live allocation holding address: writes its start and size to out[0], out[1]; 0 or JAVA_NOT_OURS */
    int32_t (*address_range)(int64_t address, int32_t device, int64_t out);
    /* memory tags (vmmkit_regions.c): 0 or -cudaError; a tag is a NUL-terminated string, 0 = every tag */
    int32_t (*region_begin)(int64_t tag, int32_t tag_length, int32_t keep_contents, int32_t device);
    int32_t (*region_end)(int32_t device);
    /* keep_contents: 0 or 1 sets the tag's setting on every device first (a tag is given), -1 leaves it */
    int32_t (*pause)(int64_t tag, int32_t tag_length, int32_t device, int32_t keep_contents);
    int32_t (*resume)(int64_t tag, int32_t tag_length, int32_t device);
    /* pinned host memory held for tags, in all and ready for the next pause: writes out[0], out[1]; 0 or -cudaError */
    int32_t (*host_memory)(int64_t out);
    /* stream_capture.c: began 1, a stream capture is about to begin (returns once no device
     * synchronisation of vmmkit's runs); began 0, one ended or failed to begin */
    void (*capture_changed)(int32_t began);
    /* vmmkit_regions.c: allocations outside every region carry the tag from now on (0: none); 0 or -cudaError */
    int32_t (*default_tag)(int64_t tag, int32_t tag_length, int32_t keep_contents);
    /* every device's cached memory back to the driver: writes the bytes to out[0]; 0 or -cudaError */
    int32_t (*release_cached)(int64_t out);
};

/* ---- jvm_bootstrap.c ---------------------------------------------------------------------- */

extern struct entry_table java;
extern int monitor_mode;
extern int zero_copy;              /* VMM_ZERO_COPY=1: device-to-device copies may become remaps */
extern int64_t passthrough_calls;  /* allocation calls served by the real runtime */

/* True when Java is up; starts it on the first call. Forked children and the thread starting
 * the JVM never wait for it. */
int java_up(void);
/* True when vmmkit serves allocations in this process (Java is up, not monitor mode): what its own
 * exported functions (vmmkit_regions.c, stream_capture.c) need to take effect. */
static inline int serving(void) { return java_up() && !monitor_mode; }
/* The program is initialising CUDA (its runtime asks for the driver's functions, or it called
 * cudaFree(NULL)): starts the JVM on a thread of its own, once, and returns at once. The first
 * allocation, usually right after CUDA's initialisation (100-300 ms on an H200), then finds the
 * JVM up, where starting it there made that allocation wait about 200 ms more. */
void start_java_soon(void);
int log_info(void);                /* VMM_LOG is info or debug */

/* ---- real_runtime.c ----------------------------------------------------------------------- */

struct real_runtime {
    cudaError_t (*cudaMalloc)(void **, size_t);
    cudaError_t (*cudaFree)(void *);
    cudaError_t (*cudaMallocAsync)(void **, size_t, cudaStream_t);
    cudaError_t (*cudaFreeAsync)(void *, cudaStream_t);
    cudaError_t (*cudaMemcpy)(void *, const void *, size_t, int);
    cudaError_t (*cudaMemcpyAsync)(void *, const void *, size_t, int, cudaStream_t);
    cudaError_t (*cudaGetDevice)(int *);
    cudaError_t (*cudaDeviceEnablePeerAccess)(int, unsigned int);
    cudaError_t (*cudaDeviceDisablePeerAccess)(int);
    cudaError_t (*cudaIpcGetMemHandle)(cudaIpcMemHandle_t *, void *);
    cudaError_t (*cudaIpcOpenMemHandle)(void **, cudaIpcMemHandle_t, unsigned int);
    cudaError_t (*cudaIpcCloseMemHandle)(void *);
    cudaError_t (*cudaMallocPitch)(void **, size_t *, size_t, size_t);
    cudaError_t (*cudaMalloc3D)(cudaPitchedPtr *, cudaExtent);
    cudaError_t (*cudaGetDriverEntryPoint)(const char *, void **, unsigned long long, int *);
    cudaError_t (*cudaGetDriverEntryPointByVersion)(const char *, void **, unsigned int, unsigned long long, int *);
    cudaError_t (*cudaStreamBeginCapture)(cudaStream_t, int);
    cudaError_t (*cudaStreamBeginCapture_ptsz)(cudaStream_t, int);
    cudaError_t (*cudaStreamBeginCaptureToGraph)(cudaStream_t, void *, const void *, const void *, size_t, int);
    cudaError_t (*cudaStreamBeginCaptureToGraph_ptsz)(cudaStream_t, void *, const void *, const void *, size_t, int);
    cudaError_t (*cudaStreamEndCapture)(cudaStream_t, void **);
    cudaError_t (*cudaStreamEndCapture_ptsz)(cudaStream_t, void **);
    cudaError_t (*cudaStreamIsCapturing)(cudaStream_t, int *);
    cudaError_t (*cudaStreamIsCapturing_ptsz)(cudaStream_t, int *);
};
extern struct real_runtime real;
extern pthread_once_t real_once;
void resolve_real(void);
cudaError_t no_runtime(const char *name);

/* Calls the real function, or fails cleanly when no runtime is loaded. While it runs, the driver
 * calls the runtime makes on this thread are its own business: the driver entry points pass them
 * straight to the driver (inside_runtime), so a call is never served or counted twice. */
extern __thread int inside_runtime;
#define REAL(name, ...) (pthread_once(&real_once, resolve_real), \
    real.name ? ({ inside_runtime++; __typeof__(real.name(__VA_ARGS__)) r_ = real.name(__VA_ARGS__); \
                   inside_runtime--; r_; }) : no_runtime(#name))

int current_device(void);          /* the runtime's current device, 0 when it cannot say */

/* The real driver (libcuda), found once a driver entry point is first called. */
struct real_driver {
    CUresult (*cuMemAlloc_v2)(CUdeviceptr *, size_t);
    CUresult (*cuMemFree_v2)(CUdeviceptr);
    CUresult (*cuMemAllocAsync)(CUdeviceptr *, size_t, CUstream);
    CUresult (*cuMemAllocAsync_ptsz)(CUdeviceptr *, size_t, CUstream);
    CUresult (*cuMemFreeAsync)(CUdeviceptr, CUstream);
    CUresult (*cuMemFreeAsync_ptsz)(CUdeviceptr, CUstream);
    CUresult (*cuMemAllocPitch_v2)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
    CUresult (*cuMemAllocFromPoolAsync)(CUdeviceptr *, size_t, void *, CUstream);
    CUresult (*cuMemAllocFromPoolAsync_ptsz)(CUdeviceptr *, size_t, void *, CUstream);
    CUresult (*cuDeviceGetDefaultMemPool)(void **, CUdevice);
    CUresult (*cuMemGetAddressRange_v2)(CUdeviceptr *, size_t *, CUdeviceptr);
    CUresult (*cuPointerGetAttribute)(void *, int, CUdeviceptr);
    CUresult (*cuPointerGetAttributes)(unsigned int, int *, void **, CUdeviceptr);
    CUresult (*cuIpcGetMemHandle)(cudaIpcMemHandle_t *, CUdeviceptr);
    CUresult (*cuIpcOpenMemHandle)(CUdeviceptr *, cudaIpcMemHandle_t, unsigned int);
    CUresult (*cuIpcOpenMemHandle_v2)(CUdeviceptr *, cudaIpcMemHandle_t, unsigned int);
    CUresult (*cuIpcCloseMemHandle)(CUdeviceptr);
    CUresult (*cuCtxEnablePeerAccess)(CUcontext, unsigned int);
    CUresult (*cuCtxDisablePeerAccess)(CUcontext);
    CUresult (*cuGetProcAddress)(const char *, void **, int, uint64_t);
    CUresult (*cuGetProcAddress_v2)(const char *, void **, int, uint64_t, int *);
    CUresult (*cuCtxGetDevice)(CUdevice *);
    CUresult (*cuCtxPushCurrent_v2)(CUcontext);
    CUresult (*cuCtxPopCurrent_v2)(CUcontext *);
    CUresult (*cuStreamBeginCapture_v2)(CUstream, int);
    CUresult (*cuStreamBeginCapture_v2_ptsz)(CUstream, int);
    CUresult (*cuStreamBeginCaptureToGraph)(CUstream, void *, const void *, const void *, size_t, int);
    CUresult (*cuStreamBeginCaptureToGraph_ptsz)(CUstream, void *, const void *, const void *, size_t, int);
    CUresult (*cuStreamEndCapture)(CUstream, void **);
    CUresult (*cuStreamEndCapture_ptsz)(CUstream, void **);
    CUresult (*cuStreamIsCapturing)(CUstream, int *);
    CUresult (*cuStreamIsCapturing_ptsz)(CUstream, int *);
};
extern struct real_driver real_cu;
extern pthread_once_t real_cu_once;
void resolve_real_driver(void);
CUresult no_driver(const char *name);

/* Calls the real driver function, or fails cleanly when no libcuda is loaded. */
#define DRIVER(name, ...) (pthread_once(&real_cu_once, resolve_real_driver), \
    real_cu.name ? real_cu.name(__VA_ARGS__) : no_driver(#name))

/* ---- lookups.c ---------------------------------------------------------------------------- */

/* A lookup through libc's dlsym: every lookup inside the shim goes through it, never the exported one. */
void *lookup(void *handle, const char *name);
/* For dlsym's answers: takes the library's function as the real one (*real_slot), if none was found
 * yet; returns vmmkit's. */
void *substitute(void **real_slot, void *library_fn, void *ours);

/* ---- allocation.c ------------------------------------------------------------------------- */

#define CALL_REAL (-1)

/* cudaSuccess or a cudaError when vmmkit decided the call, CALL_REAL when the runtime must serve it. */
int vmmkit_malloc(void **ptr, size_t size, int device, cudaStream_t stream);
int vmmkit_free(void *ptr, int device, int64_t stream);
/* The same for a stream-ordered call: on a capturing stream, CUDA's allocation, a free as cudaFree's. */
int vmmkit_malloc_on_stream(void **ptr, size_t size, int device, cudaStream_t stream);
int vmmkit_free_on_stream(void *ptr, int device, cudaStream_t stream);
/* After the real runtime served an allocation call: count it, and record it in monitor mode. */
cudaError_t served_by_runtime(cudaError_t rc, void **ptr, size_t size, cudaStream_t stream);
cudaError_t freed_by_runtime(cudaError_t rc);

/* ---- runtime_api.c ------------------------------------------------------------------------ */

/* vmmkit's function for an intercepted runtime name found by handle, else NULL. */
void *runtime_api_substitute(const char *name, void *runtime_fn);

/* ---- stream_capture.c --------------------------------------------------------------------- */

/* vmmkit's function for an intercepted runtime capture call found by handle, else NULL. */
void *stream_capture_substitute(const char *name, void *runtime_fn);
/* True while stream-ordered work on stream is captured into a graph (a capture is under way in the
 * process and the stream captures, or its runtime or driver cannot say): the allocation calls leave
 * such allocations and frees to CUDA, as the graph's own. */
int runtime_stream_captures(cudaStream_t stream, int per_thread);
int driver_stream_captures(CUstream stream, int per_thread);

/* ---- driver_api.c ------------------------------------------------------------------------- */

/* The pitch of a pitched allocation (cuMemAllocPitch, cudaMallocPitch, cudaMalloc3D): the row's
 * width in bytes rounded up to PITCH_ALIGNMENT, as CUDA gives on current GPUs. */
#define PITCH_ALIGNMENT 512
size_t pitch_of(size_t width);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemAllocAsync(CUdeviceptr *, size_t, CUstream);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *, size_t, CUstream);
CUresult cuMemFreeAsync(CUdeviceptr, CUstream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr, CUstream);
CUresult cuMemAllocPitch_v2(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *, size_t, void *, CUstream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *, size_t, void *, CUstream);
CUresult cuMemGetAddressRange_v2(CUdeviceptr *, size_t *, CUdeviceptr);
CUresult cuPointerGetAttribute(void *, int, CUdeviceptr);
CUresult cuPointerGetAttributes(unsigned int, int *, void **, CUdeviceptr);
CUresult cuIpcGetMemHandle(cudaIpcMemHandle_t *, CUdeviceptr);
CUresult cuIpcOpenMemHandle(CUdeviceptr *, cudaIpcMemHandle_t, unsigned int);
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *, cudaIpcMemHandle_t, unsigned int);
CUresult cuIpcCloseMemHandle(CUdeviceptr);
CUresult cuCtxEnablePeerAccess(CUcontext, unsigned int);
CUresult cuCtxDisablePeerAccess(CUcontext);
CUresult cuGetProcAddress(const char *, void **, int, uint64_t);        /* entry_points.c */
CUresult cuStreamBeginCapture_v2(CUstream, int);                         /* stream_capture.c */
CUresult cuStreamBeginCapture_v2_ptsz(CUstream, int);
CUresult cuStreamBeginCaptureToGraph(CUstream, void *, const void *, const void *, size_t, int);
CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream, void *, const void *, const void *, size_t, int);
CUresult cuStreamEndCapture(CUstream, void **);
CUresult cuStreamEndCapture_ptsz(CUstream, void **);
CUresult cuGetProcAddress_v2(const char *, void **, int, uint64_t, int *);

/* ---- entry_points.c ----------------------------------------------------------------------- */

/* vmmkit's function for an intercepted driver name (as exported: cuMemAlloc_v2) or one of the
 * runtime's entry-point queries found by handle, else NULL. */
void *driver_api_substitute(const char *name, void *library_fn);

#endif
