/*
 * fake_cuda.c: a stand-in CUDA driver for tests, built as libcuda.so.1. "Device" memory is host
 * memory, so copies are memcpy. It counts the allocations that reach it (with vmmkit in vmm mode,
 * none should), refuses to free pointers it did not hand out, answers range questions about its
 * own allocations, and hands out its functions through cuGetProcAddress as the real driver does
 * (base names, a version, per-thread default stream variants).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fake_capture.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUstream;
typedef void *CUcontext;
typedef int CUdevice;
typedef struct { char reserved[64]; } CUipcMemHandle;
enum { CUDA_SUCCESS = 0, CUDA_ERROR_INVALID_VALUE = 1, CUDA_ERROR_OUT_OF_MEMORY = 2,
       CUDA_ERROR_INVALID_CONTEXT = 201, CUDA_ERROR_NOT_FOUND = 500, CUDA_ERROR_ILLEGAL_STATE = 401 };
enum { RANGE_START_ADDR = 11, RANGE_SIZE = 12, MEMORY_TYPE = 2 };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long alloc_calls, free_calls, ipc_calls;
static __thread int no_context; /* fake_cuda_drop_context(): cuCtxGetDevice fails on this thread */

#define LIVE_MAX 4096
static struct { CUdeviceptr base; size_t size; } live[LIVE_MAX];

static CUresult allocate(CUdeviceptr *dptr, size_t size) {
    if (!dptr) return CUDA_ERROR_INVALID_VALUE;
    if (size == 0 || size > ((size_t) 1 << 40)) return CUDA_ERROR_OUT_OF_MEMORY;
    void *p = aligned_alloc(256, (size + 255) & ~(size_t) 255);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&lock);
    alloc_calls++;
    for (int i = 0; i < LIVE_MAX; i++) {
        if (!live[i].base) {
            live[i].base = (CUdeviceptr) (uintptr_t) p;
            live[i].size = size;
            pthread_mutex_unlock(&lock);
            *dptr = (CUdeviceptr) (uintptr_t) p;
            return CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&lock);
    free(p);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult release(CUdeviceptr dptr) {
    pthread_mutex_lock(&lock);
    free_calls++;
    for (int i = 0; i < LIVE_MAX; i++) {
        if (dptr && live[i].base == dptr) {
            live[i].base = 0;
            pthread_mutex_unlock(&lock);
            free((void *) (uintptr_t) dptr);
            return CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&lock);
    return CUDA_ERROR_INVALID_VALUE;
}

/* The allocation of this stand-in holding ptr, or -1. Lock held. */
static int holding(CUdeviceptr ptr) {
    for (int i = 0; i < LIVE_MAX; i++)
        if (live[i].base && live[i].base <= ptr && ptr - live[i].base < live[i].size) return i;
    return -1;
}

/* ---- The driver functions. They call the helpers above, never each other: a call between them
 * would go through the PLT and reach vmmkit a second time. ---- */

CUresult cuInit(unsigned int flags) { (void) flags; return CUDA_SUCCESS; }

CUresult cuCtxGetDevice(CUdevice *device) {
    if (no_context) return CUDA_ERROR_INVALID_CONTEXT;
    *device = 0;
    return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent_v2(CUcontext context) { (void) context; return CUDA_SUCCESS; }
CUresult cuCtxPopCurrent_v2(CUcontext *context) { if (context) *context = NULL; return CUDA_SUCCESS; }

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size) { return allocate(dptr, size); }
CUresult cuMemFree_v2(CUdeviceptr dptr) { return release(dptr); }
CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t size, CUstream s) { (void) s; return allocate(dptr, size); }
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream s) { (void) s; return allocate(dptr, size); }
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s) { (void) s; return release(dptr); }
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s) { (void) s; return release(dptr); }

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t size, void *pool, CUstream s) {
    (void) pool; (void) s;
    return allocate(dptr, size);
}

/* Device 0's default memory pool: a fixed token, as the driver's never changes. */
#define DEFAULT_POOL ((void *) 0xdefa017)
CUresult cuDeviceGetDefaultMemPool(void **pool, CUdevice device) {
    if (!pool || device != 0) return CUDA_ERROR_INVALID_VALUE;
    *pool = DEFAULT_POOL;
    return CUDA_SUCCESS;
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height, unsigned int element) {
    if (!pitch || (element != 4 && element != 8 && element != 16)) return CUDA_ERROR_INVALID_VALUE;
    *pitch = (width + 511) & ~(size_t) 511;
    return allocate(dptr, *pitch * height);
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr ptr) {
    pthread_mutex_lock(&lock);
    int i = holding(ptr);
    if (i >= 0) {
        if (base) *base = live[i].base;
        if (size) *size = live[i].size;
    }
    pthread_mutex_unlock(&lock);
    return i >= 0 ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/* The stand-in knows every pointer vmmkit maps (host memory): it answers "device memory" for any
 * pointer, and the range of its own allocations only (as the real driver answers with one mapping). */
static CUresult attribute(void *data, int attribute, CUdeviceptr ptr) {
    if (!data) return CUDA_ERROR_INVALID_VALUE;
    if (attribute == MEMORY_TYPE) { *(unsigned int *) data = 2; return CUDA_SUCCESS; }
    if (attribute != RANGE_START_ADDR && attribute != RANGE_SIZE) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    int i = holding(ptr);
    CUdeviceptr base = i >= 0 ? live[i].base : ptr & ~(CUdeviceptr) 0x1fffff; /* "one 2 MiB mapping" */
    size_t size = i >= 0 ? live[i].size : 2 << 20;
    pthread_mutex_unlock(&lock);
    if (attribute == RANGE_START_ADDR) *(CUdeviceptr *) data = base;
    else *(size_t *) data = size;
    return CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void *data, int kind, CUdeviceptr ptr) { return attribute(data, kind, ptr); }

CUresult cuPointerGetAttributes(unsigned int count, int *kinds, void **data, CUdeviceptr ptr) {
    for (unsigned int i = 0; i < count; i++) {
        CUresult rc = attribute(data[i], kinds[i], ptr);
        if (rc != CUDA_SUCCESS) return rc;
    }
    return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
    memmove((void *) (uintptr_t) dst, src, n);
    return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    memmove(dst, (const void *) (uintptr_t) src, n);
    return CUDA_SUCCESS;
}

/* No IPC or peers of its own: every call is refused, and counted. */
static CUresult refused_ipc_call(void) {
    pthread_mutex_lock(&lock);
    ipc_calls++;
    pthread_mutex_unlock(&lock);
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p) { (void) h; (void) p; return refused_ipc_call(); }
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *p, CUipcMemHandle h, unsigned int f) {
    (void) p; (void) h; (void) f;
    return refused_ipc_call();
}
CUresult cuIpcCloseMemHandle(CUdeviceptr p) { (void) p; return refused_ipc_call(); }

/* ---- Stream capture (fake_capture.h) ---- */

CUresult cuStreamBeginCapture_v2(CUstream stream, int mode) {
    (void) mode;
    return capture_begin(stream) ? CUDA_ERROR_ILLEGAL_STATE : CUDA_SUCCESS;
}

CUresult cuStreamIsCapturing(CUstream stream, int *status) {
    if (!status) return CUDA_ERROR_INVALID_VALUE;
    *status = capture_status(stream);
    return CUDA_SUCCESS;
}

CUresult cuStreamEndCapture(CUstream stream, void **graph) {
    if (capture_end(stream)) return CUDA_ERROR_ILLEGAL_STATE;
    if (graph) *graph = (void *) 0x6a;
    return CUDA_SUCCESS;
}

/* ---- cuGetProcAddress: base name, version, flags (2: per-thread default stream) ---- */

CUresult cuGetProcAddress(const char *, void **, int, unsigned long long);
CUresult cuGetProcAddress_v2(const char *, void **, int, unsigned long long, int *);

struct proc { const char *name; int since; int per_thread; void *fn; };
static const struct proc procs[] = {
    {"cuMemAlloc", 3020, 0, (void *) cuMemAlloc_v2},
    {"cuMemFree", 3020, 0, (void *) cuMemFree_v2},
    {"cuMemAllocPitch", 3020, 0, (void *) cuMemAllocPitch_v2},
    {"cuMemGetAddressRange", 3020, 0, (void *) cuMemGetAddressRange_v2},
    {"cuMemAllocAsync", 11020, 1, (void *) cuMemAllocAsync_ptsz},
    {"cuMemAllocAsync", 11020, 0, (void *) cuMemAllocAsync},
    {"cuMemFreeAsync", 11020, 1, (void *) cuMemFreeAsync_ptsz},
    {"cuMemFreeAsync", 11020, 0, (void *) cuMemFreeAsync},
    {"cuPointerGetAttribute", 4000, 0, (void *) cuPointerGetAttribute},
    {"cuMemcpyHtoD", 3020, 0, (void *) cuMemcpyHtoD_v2},
    {"cuMemcpyDtoH", 3020, 0, (void *) cuMemcpyDtoH_v2},
    {"cuCtxGetDevice", 2000, 0, (void *) cuCtxGetDevice},
    {"cuStreamBeginCapture", 10010, 0, (void *) cuStreamBeginCapture_v2},
    {"cuStreamEndCapture", 10000, 0, (void *) cuStreamEndCapture},
    {"cuGetProcAddress", 12000, 0, (void *) cuGetProcAddress_v2},
    {"cuGetProcAddress", 11030, 0, (void *) cuGetProcAddress},
};

static CUresult get_proc(const char *name, void **pfn, int version, unsigned long long flags) {
    if (!name || !pfn) return CUDA_ERROR_INVALID_VALUE;
    int per_thread = (flags & 2) != 0;
    for (int pass = 0; pass < 2; pass++, per_thread = 0) {
        for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++) {
            if (procs[i].per_thread == per_thread && version >= procs[i].since && strcmp(procs[i].name, name) == 0) {
                *pfn = procs[i].fn;
                return CUDA_SUCCESS;
            }
        }
    }
    *pfn = NULL;
    return CUDA_ERROR_NOT_FOUND;
}

CUresult cuGetProcAddress(const char *name, void **pfn, int version, unsigned long long flags) {
    return get_proc(name, pfn, version, flags);
}

CUresult cuGetProcAddress_v2(const char *name, void **pfn, int version, unsigned long long flags, int *status) {
    CUresult rc = get_proc(name, pfn, version, flags);
    if (status) *status = rc == CUDA_SUCCESS ? 0 : 1;
    return rc;
}

/* ---- Fixture hooks ---- */

long fake_cuda_alloc_calls(void) {
    pthread_mutex_lock(&lock);
    long calls = alloc_calls;
    pthread_mutex_unlock(&lock);
    return calls;
}

long fake_cuda_free_calls(void) {
    pthread_mutex_lock(&lock);
    long calls = free_calls;
    pthread_mutex_unlock(&lock);
    return calls;
}

long fake_cuda_ipc_calls(void) {
    pthread_mutex_lock(&lock);
    long calls = ipc_calls;
    pthread_mutex_unlock(&lock);
    return calls;
}

/* This library's own cuMemAlloc_v2, as its code sees it (a lookup from elsewhere may be answered by vmmkit). */
void *fake_cuda_own_mem_alloc(void) { return (void *) cuMemAlloc_v2; }

/* The calling thread has no current context from now on. */
void fake_cuda_drop_context(void) { no_context = 1; }
