/*
 * fake_cudart.c: a stand-in CUDA runtime for tests, built as libcudart.so. "Device" memory is host
 * memory, so copies are memcpy. It counts the allocations and copies that reach it (with vmmkit in
 * vmm mode, no allocation should, and with VMM_ZERO_COPY=1 no whole-buffer resize copy should) and
 * refuses to free pointers it did not hand out, as the real runtime does.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fake_capture.h"

typedef int cudaError_t;
typedef void *cudaStream_t;
enum { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2,
       cudaErrorInvalidDevice = 101, cudaErrorInvalidMemcpyDirection = 21,
       cudaErrorPeerAccessAlreadyEnabled = 704, cudaErrorPeerAccessNotEnabled = 705,
       cudaErrorIllegalState = 401 };
typedef struct { char reserved[64]; } cudaIpcMemHandle_t;
#define DEVICE_COUNT 2

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long malloc_calls, free_calls, ipc_calls, device_copies;
static int peer_enabled[2][2]; /* [device][peer], under the lock */
static __thread int current_device;

/* Live pointers, so a free of anything else fails like the real runtime's. */
#define BUCKETS 4096
struct live { void *ptr; struct live *next; };
static struct live *live[BUCKETS];
static size_t bucket(void *p) { return ((uintptr_t) p >> 8) % BUCKETS; }

static void *allocate(size_t size) {
    void *p = aligned_alloc(256, (size + 255) & ~(size_t) 255);
    struct live *entry = malloc(sizeof *entry);
    if (!p || !entry) { free(p); free(entry); return NULL; }
    pthread_mutex_lock(&lock);
    entry->ptr = p;
    entry->next = live[bucket(p)];
    live[bucket(p)] = entry;
    pthread_mutex_unlock(&lock);
    return p;
}

static cudaError_t release(void *p) {
    pthread_mutex_lock(&lock);
    free_calls++;
    for (struct live **at = &live[bucket(p)]; *at; at = &(*at)->next) {
        if ((*at)->ptr == p) {
            struct live *gone = *at;
            *at = gone->next;
            pthread_mutex_unlock(&lock);
            free(gone);
            free(p);
            return cudaSuccess;
        }
    }
    pthread_mutex_unlock(&lock);
    return cudaErrorInvalidValue;
}

/* The public functions call these, never each other: a call between them would go through the
 * PLT and be intercepted a second time. */
static cudaError_t fake_malloc(void **devPtr, size_t size) {
    if (!devPtr) return cudaErrorInvalidValue;
    pthread_mutex_lock(&lock);
    malloc_calls++;
    pthread_mutex_unlock(&lock);
    if (size == 0) { *devPtr = NULL; return cudaSuccess; }
    if (size > ((size_t) 1 << 40)) return cudaErrorMemoryAllocation;
    return (*devPtr = allocate(size)) ? cudaSuccess : cudaErrorMemoryAllocation;
}

static cudaError_t fake_memcpy(void *dst, const void *src, size_t count, int kind) {
    if (kind < 0 || kind > 4) return cudaErrorInvalidMemcpyDirection;
    if (count && (!dst || !src)) return cudaErrorInvalidValue;
    if (kind == 3 || kind == 4) { /* device to device, or "default" (the pointers say) */
        pthread_mutex_lock(&lock);
        device_copies++;
        pthread_mutex_unlock(&lock);
    }
    memmove(dst, src, count);
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **devPtr, size_t size) { return fake_malloc(devPtr, size); }

cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t stream) {
    (void) stream;
    return fake_malloc(devPtr, size);
}

cudaError_t cudaFree(void *devPtr) { return devPtr ? release(devPtr) : cudaSuccess; }

cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t stream) {
    (void) stream;
    return devPtr ? release(devPtr) : cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, int kind) {
    return fake_memcpy(dst, src, count, kind);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, int kind, cudaStream_t stream) {
    (void) stream;
    return fake_memcpy(dst, src, count, kind);
}

cudaError_t cudaGetDevice(int *device) {
    if (!device) return cudaErrorInvalidValue;
    *device = current_device;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
    if (device < 0 || device >= DEVICE_COUNT) return cudaErrorInvalidDevice;
    current_device = device;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }

/* ---- Peer access, peer copies, IPC: the stand-in has no IPC of its own (every call is refused,
 * and counted, so tests see which calls reached it). ---- */

static int valid_device(int device) { return device >= 0 && device < DEVICE_COUNT; }

cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer) {
    if (!can) return cudaErrorInvalidValue;
    if (!valid_device(device) || !valid_device(peer)) return cudaErrorInvalidDevice;
    *can = device != peer;
    return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
    if (!valid_device(peer) || peer == current_device) return cudaErrorInvalidDevice;
    if (flags != 0) return cudaErrorInvalidValue;
    pthread_mutex_lock(&lock);
    int already = peer_enabled[current_device][peer];
    peer_enabled[current_device][peer] = 1;
    pthread_mutex_unlock(&lock);
    return already ? cudaErrorPeerAccessAlreadyEnabled : cudaSuccess;
}

cudaError_t cudaDeviceDisablePeerAccess(int peer) {
    if (!valid_device(peer) || peer == current_device) return cudaErrorInvalidDevice;
    pthread_mutex_lock(&lock);
    int was = peer_enabled[current_device][peer];
    peer_enabled[current_device][peer] = 0;
    pthread_mutex_unlock(&lock);
    return was ? cudaSuccess : cudaErrorPeerAccessNotEnabled;
}

cudaError_t cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice, size_t count) {
    if (!valid_device(dstDevice) || !valid_device(srcDevice)) return cudaErrorInvalidDevice;
    return fake_memcpy(dst, src, count, 4);
}

cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice, size_t count,
                                cudaStream_t stream) {
    (void) stream;
    if (!valid_device(dstDevice) || !valid_device(srcDevice)) return cudaErrorInvalidDevice;
    return fake_memcpy(dst, src, count, 4);
}

static cudaError_t refused_ipc_call(void) {
    pthread_mutex_lock(&lock);
    ipc_calls++;
    pthread_mutex_unlock(&lock);
    return cudaErrorInvalidValue;
}

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr) {
    (void) handle; (void) devPtr;
    return refused_ipc_call();
}

cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle, unsigned int flags) {
    (void) devPtr; (void) handle; (void) flags;
    return refused_ipc_call();
}

cudaError_t cudaIpcCloseMemHandle(void *devPtr) {
    (void) devPtr;
    return refused_ipc_call();
}

/* ---- Pitched allocations (rows of the width rounded up to 512 bytes) and the driver's entry
 * points, which the runtime finds through the driver's cuGetProcAddress_v2 as the real one does. ---- */

typedef struct { size_t width, height, depth; } cudaExtent;
typedef struct { void *ptr; size_t pitch, xsize, ysize; } cudaPitchedPtr;

cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height) {
    if (!pitch) return cudaErrorInvalidValue;
    *pitch = (width + 511) & ~(size_t) 511;
    return fake_malloc(devPtr, *pitch * height);
}

cudaError_t cudaMalloc3D(cudaPitchedPtr *pitched, cudaExtent extent) {
    if (!pitched) return cudaErrorInvalidValue;
    size_t pitch = (extent.width + 511) & ~(size_t) 511;
    cudaError_t rc = fake_malloc(&pitched->ptr, pitch * extent.height * extent.depth);
    pitched->pitch = pitch;
    pitched->xsize = extent.width;
    pitched->ysize = extent.height;
    return rc;
}

/* Stream capture (fake_capture.h). */
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, int mode) {
    (void) mode;
    return capture_begin(stream) ? cudaErrorIllegalState : cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, int *status) {
    if (!status) return cudaErrorInvalidValue;
    *status = capture_status(stream);
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, void **graph) {
    if (capture_end(stream)) return cudaErrorIllegalState;
    if (graph) *graph = (void *) 0x6a;
    return cudaSuccess;
}

typedef int (*get_proc_fn)(const char *, void **, int, unsigned long long, int *);

static cudaError_t driver_entry(const char *symbol, void **pfn, int version, unsigned long long flags, int *status) {
    void *libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    get_proc_fn get_proc = libcuda ? (get_proc_fn) dlsym(libcuda, "cuGetProcAddress_v2") : NULL;
    if (!get_proc) return cudaErrorInvalidValue;
    return get_proc(symbol, pfn, version, flags, status) == 0 ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **pfn, unsigned long long flags, int *status) {
    return driver_entry(symbol, pfn, 13000, flags, status);
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **pfn, unsigned int version,
                                             unsigned long long flags, int *status) {
    return driver_entry(symbol, pfn, (int) version, flags, status);
}

/* ---- Fixture hooks ---- */

long fake_cudart_malloc_calls(void) {
    pthread_mutex_lock(&lock);
    long calls = malloc_calls;
    pthread_mutex_unlock(&lock);
    return calls;
}

long fake_cudart_free_calls(void) {
    pthread_mutex_lock(&lock);
    long calls = free_calls;
    pthread_mutex_unlock(&lock);
    return calls;
}

/* Copies of kind device-to-device or default that reached the stand-in. */
long fake_cudart_device_copies(void) {
    pthread_mutex_lock(&lock);
    long calls = device_copies;
    pthread_mutex_unlock(&lock);
    return calls;
}

long fake_cudart_ipc_calls(void) {
    pthread_mutex_lock(&lock);
    long calls = ipc_calls;
    pthread_mutex_unlock(&lock);
    return calls;
}

/* Memory from the stand-in itself, bypassing any interposed cudaMalloc: a pointer vmmkit never saw. */
void *fake_cudart_own_malloc(size_t size) { return allocate(size); }
