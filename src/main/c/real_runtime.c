/*
 * real_runtime.c: the real CUDA runtime's functions, for every call vmmkit does not serve.
 *
 * Rule of the shim: the host program keeps running whatever state vmmkit is in. Whenever vmmkit
 * cannot serve a call (monitor mode, a pointer it does not own, a forked child, a JVM that did not
 * start) the call goes to the real CUDA runtime, found here.
 */
#include "shim.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

struct real_runtime real;
pthread_once_t real_once = PTHREAD_ONCE_INIT;

/* Finds a loaded libcudart: a library loaded with dlopen(RTLD_LOCAL), as Python does, is not
 * visible to dlsym(RTLD_NEXT), so we look through the loaded objects ourselves. */
static int find_cudart(struct dl_phdr_info *info, size_t size, void *found) {
    (void) size;
    if (info->dlpi_name && strstr(info->dlpi_name, "libcudart.so")) {
        *(void **) found = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
        return *(void **) found != NULL;
    }
    return 0;
}

static void *real_symbol(void *cudart, const char *name) {
    void *fn = lookup(RTLD_NEXT, name);
    return fn ? fn : cudart ? lookup(cudart, name) : NULL;
}

void resolve_real(void) {
    void *cudart = NULL;
    dl_iterate_phdr(find_cudart, &cudart);
#define RESOLVE(name) real.name = (__typeof__(real.name)) real_symbol(cudart, #name)
    RESOLVE(cudaMalloc); RESOLVE(cudaFree); RESOLVE(cudaMallocAsync); RESOLVE(cudaFreeAsync);
    RESOLVE(cudaMemcpy); RESOLVE(cudaMemcpyAsync); RESOLVE(cudaGetDevice);
    RESOLVE(cudaDeviceEnablePeerAccess); RESOLVE(cudaDeviceDisablePeerAccess);
    RESOLVE(cudaIpcGetMemHandle); RESOLVE(cudaIpcOpenMemHandle); RESOLVE(cudaIpcCloseMemHandle);
#undef RESOLVE
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

