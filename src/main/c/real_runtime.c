/*
 * real_runtime.c: the real CUDA runtime's and driver's functions, for every call vmmkit does not serve.
 *
 * Rule of the shim: the host program keeps running whatever state vmmkit is in. Whenever vmmkit
 * cannot serve a call (monitor mode, a pointer it does not own, a forked child, a JVM that did not
 * start) the call goes to the real CUDA runtime (or driver), found here.
 */
#include "shim.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

struct real_runtime real;
pthread_once_t real_once = PTHREAD_ONCE_INIT;
__thread int inside_runtime;
struct real_driver real_cu;
pthread_once_t real_cu_once = PTHREAD_ONCE_INIT;

/* Finds a loaded library by name (libcudart, libcuda): a library loaded with dlopen(RTLD_LOCAL), as Python does, is not
 * visible to dlsym(RTLD_NEXT), so we look through the loaded objects ourselves. The walk copies the
 * path of the first object whose name contains want; the dlopen comes after it (loaded_library). */
struct loaded { const char *want; char path[PATH_MAX]; };

static int find_loaded(struct dl_phdr_info *info, size_t size, void *data) {
    (void) size;
    struct loaded *found = data;
    if (!info->dlpi_name || !strstr(info->dlpi_name, found->want)) return 0;
    snprintf(found->path, sizeof found->path, "%s", info->dlpi_name);
    return 1;
}

/* A handle to the loaded library whose name contains name, NULL when none is loaded. dlopen only
 * after dl_iterate_phdr has returned: inside its callback the loader's lock order is reversed, and a
 * dlopen there deadlocked against the JVM's start loading libjvm on another thread. */
static void *loaded_library(const char *name) {
    struct loaded found = { name, "" };
    if (!dl_iterate_phdr(find_loaded, &found)) return NULL;
    return dlopen(found.path, RTLD_LAZY | RTLD_NOLOAD);
}

static void *real_symbol(void *library, const char *name) {
    void *fn = lookup(RTLD_NEXT, name);
    return fn ? fn : library ? lookup(library, name) : NULL;
}

void resolve_real(void) {
    void *cudart = loaded_library("libcudart.so");
#define RESOLVE(name) real.name = (__typeof__(real.name)) real_symbol(cudart, #name)
    RESOLVE(cudaMalloc); RESOLVE(cudaFree); RESOLVE(cudaMallocAsync); RESOLVE(cudaFreeAsync);
    RESOLVE(cudaMemcpy); RESOLVE(cudaMemcpyAsync); RESOLVE(cudaGetDevice);
    RESOLVE(cudaDeviceEnablePeerAccess); RESOLVE(cudaDeviceDisablePeerAccess);
    RESOLVE(cudaIpcGetMemHandle); RESOLVE(cudaIpcOpenMemHandle); RESOLVE(cudaIpcCloseMemHandle);
    RESOLVE(cudaMallocPitch); RESOLVE(cudaMalloc3D);
    RESOLVE(cudaGetDriverEntryPoint); RESOLVE(cudaGetDriverEntryPointByVersion);
    RESOLVE(cudaStreamBeginCapture); RESOLVE(cudaStreamBeginCapture_ptsz);
    RESOLVE(cudaStreamBeginCaptureToGraph); RESOLVE(cudaStreamBeginCaptureToGraph_ptsz);
    RESOLVE(cudaStreamEndCapture); RESOLVE(cudaStreamEndCapture_ptsz);
    RESOLVE(cudaStreamIsCapturing); RESOLVE(cudaStreamIsCapturing_ptsz);
#undef RESOLVE
}

/* Slots already filled (by a lookup the program made through dlsym or cuGetProcAddress) are kept. */
void resolve_real_driver(void) {
    void *libcuda = loaded_library("libcuda.so");
#define RESOLVE(name) if (!real_cu.name) real_cu.name = (__typeof__(real_cu.name)) real_symbol(libcuda, #name)
    RESOLVE(cuMemAlloc_v2); RESOLVE(cuMemFree_v2); RESOLVE(cuMemAllocAsync); RESOLVE(cuMemAllocAsync_ptsz);
    RESOLVE(cuMemFreeAsync); RESOLVE(cuMemFreeAsync_ptsz); RESOLVE(cuMemAllocPitch_v2);
    RESOLVE(cuMemAllocFromPoolAsync); RESOLVE(cuMemAllocFromPoolAsync_ptsz); RESOLVE(cuDeviceGetDefaultMemPool);
    RESOLVE(cuMemGetAddressRange_v2); RESOLVE(cuPointerGetAttribute); RESOLVE(cuPointerGetAttributes);
    RESOLVE(cuIpcGetMemHandle); RESOLVE(cuIpcOpenMemHandle); RESOLVE(cuIpcOpenMemHandle_v2);
    RESOLVE(cuIpcCloseMemHandle); RESOLVE(cuCtxEnablePeerAccess); RESOLVE(cuCtxDisablePeerAccess);
    RESOLVE(cuGetProcAddress); RESOLVE(cuGetProcAddress_v2);
    RESOLVE(cuCtxGetDevice); RESOLVE(cuCtxPushCurrent_v2); RESOLVE(cuCtxPopCurrent_v2);
    RESOLVE(cuStreamBeginCapture_v2); RESOLVE(cuStreamBeginCapture_v2_ptsz);
    RESOLVE(cuStreamBeginCaptureToGraph); RESOLVE(cuStreamBeginCaptureToGraph_ptsz);
    RESOLVE(cuStreamEndCapture); RESOLVE(cuStreamEndCapture_ptsz);
    RESOLVE(cuStreamIsCapturing); RESOLVE(cuStreamIsCapturing_ptsz);
#undef RESOLVE
}

CUresult no_driver(const char *name) {
    fprintf(stderr, "vmmkit: %s: no CUDA driver (libcuda) found in this process\n", name);
    return CUDA_ERROR_NOT_INITIALIZED;
}

cudaError_t no_runtime(const char *name) {
    fprintf(stderr, "vmmkit: %s: no CUDA runtime (libcudart) found in this process\n", name);
    return cudaErrorInitializationError;
}

int current_device(void) {
    int device = 0;
    pthread_once(&real_once, resolve_real);
    if (real.cudaGetDevice && real.cudaGetDevice(&device) != cudaSuccess) device = 0;
    return device;
}

