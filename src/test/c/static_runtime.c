/*
 * static_runtime.c: a stand-in for a statically linked CUDA runtime, built as a static library
 * (libstatic_runtime.a) and linked into driver_test. Like libcudart_static, it has no symbol of the
 * driver: it opens libcuda itself, asks dlsym for cuGetProcAddress_v2 only, and gets every other
 * driver function by name through it.
 */
#include <dlfcn.h>
#include <stddef.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef CUresult (*get_proc_fn)(const char *, void **, int, unsigned long long, int *);

static CUresult (*mem_alloc)(CUdeviceptr *, size_t);
static CUresult (*mem_free)(CUdeviceptr);
static CUresult (*copy_in)(CUdeviceptr, const void *, size_t);
static CUresult (*copy_out)(void *, CUdeviceptr, size_t);

/* 0 when every function was found. */
int static_runtime_init(void) {
    void *libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    get_proc_fn get_proc = libcuda ? (get_proc_fn) dlsym(libcuda, "cuGetProcAddress_v2") : NULL;
    int status;
    if (!get_proc) return 1;
    get_proc("cuMemAlloc", (void **) &mem_alloc, 12080, 0, &status);
    get_proc("cuMemFree", (void **) &mem_free, 12080, 0, &status);
    get_proc("cuMemcpyHtoD", (void **) &copy_in, 12080, 0, &status);
    get_proc("cuMemcpyDtoH", (void **) &copy_out, 12080, 0, &status);
    return mem_alloc && mem_free && copy_in && copy_out ? 0 : 2;
}

/* The runtime's cudaMalloc, cudaFree and copies, as a static runtime makes them: driver calls. */
int static_runtime_malloc(void **ptr, size_t size) {
    CUdeviceptr p = 0;
    CUresult rc = mem_alloc(&p, size);
    *ptr = (void *) (size_t) p;
    return rc;
}

int static_runtime_free(void *ptr) { return mem_free((CUdeviceptr) (size_t) ptr); }
int static_runtime_copy_in(void *dst, const void *src, size_t n) { return copy_in((CUdeviceptr) (size_t) dst, src, n); }
int static_runtime_copy_out(void *dst, const void *src, size_t n) { return copy_out(dst, (CUdeviceptr) (size_t) src, n); }
