/*
 * bench_pair.c: cost of one intercepted cudaMalloc + cudaFree pair on a cache hit (the same size
 * freed and asked again), and of the first call, which starts vmmkit's JVM.
 * Usage: bench_pair [SIZE] [SAMPLES] [cuda|torch|driver] [STREAM]. Run under `vmmkit run` (or
 * LD_PRELOAD by hand), or natively (cuda, driver). cuda (the default): cudaMalloc + cudaFree. torch:
 * the shim's PyTorch pluggable-allocator entry points (vmmkit_torch_alloc/free, found in the
 * preloaded shim) on STREAM (default 0), as PyTorch calls them for torch.empty + del. driver:
 * cuMemAlloc_v2 + cuMemFree_v2, looked up in libcuda.so.1 by handle (vmmkit's when preloaded), in
 * the primary context the runtime made current.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

typedef int cudaError_t;
cudaError_t cudaMalloc(void **, size_t);
cudaError_t cudaFree(void *);

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static double thread_cpu_ns(void) { /* time this thread ran: load on the machine does not add to it */
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

static void *(*torch_alloc)(ssize_t, int, void *);
static void (*torch_free)(void *, ssize_t, int, void *);
static void *stream;
static int (*mem_alloc)(unsigned long long *, size_t);
static int (*mem_free)(unsigned long long);

static int pair(size_t size) {
    void *p = NULL;
    if (mem_alloc) {
        unsigned long long d = 0;
        return mem_alloc(&d, size) != 0 || mem_free(d) != 0;
    }
    if (torch_alloc) {
        p = torch_alloc((ssize_t) size, 0, stream);
        torch_free(p, (ssize_t) size, 0, stream);
        return p == NULL;
    }
    return cudaMalloc(&p, size) != 0 || cudaFree(p) != 0;
}

int main(int argc, char **argv) {
    size_t size = argc > 1 ? strtoull(argv[1], NULL, 0) : 4096;
    int samples = argc > 2 ? atoi(argv[2]) : 200000;
    enum { BATCH = 1000 };
    if (argc > 3 && strcmp(argv[3], "torch") == 0) {
        torch_alloc = (void *(*)(ssize_t, int, void *)) dlsym(RTLD_DEFAULT, "vmmkit_torch_alloc");
        torch_free = (void (*)(void *, ssize_t, int, void *)) dlsym(RTLD_DEFAULT, "vmmkit_torch_free");
        if (!torch_alloc || !torch_free) { fprintf(stderr, "bench_pair: no vmmkit shim preloaded\n"); return 2; }
        stream = (void *) (intptr_t) (argc > 4 ? strtoll(argv[4], NULL, 0) : 0);
    }
    if (argc > 3 && strcmp(argv[3], "driver") == 0) {
        void *libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
        mem_alloc = libcuda ? (int (*)(unsigned long long *, size_t)) dlsym(libcuda, "cuMemAlloc_v2") : NULL;
        mem_free = libcuda ? (int (*)(unsigned long long)) dlsym(libcuda, "cuMemFree_v2") : NULL;
        if (!mem_alloc || !mem_free) { fprintf(stderr, "bench_pair: no libcuda.so.1\n"); return 2; }
        if (cudaFree(NULL) != 0) { fprintf(stderr, "bench_pair: the runtime did not start\n"); return 1; }
    }

    double start = now_ns();
    if (pair(size)) { fprintf(stderr, "bench_pair: first pair failed\n"); return 1; }
    double first_ms = (now_ns() - start) / 1e6;

    for (int i = 0; i < 500000; i++) if (pair(size)) return 1; /* warm up the JIT */

    double *single = malloc(sizeof(double) * samples);
    for (int i = 0; i < samples; i++) { /* one pair per sample (includes ~20 ns of clock reads) */
        double t = now_ns();
        if (pair(size)) return 1;
        single[i] = now_ns() - t;
    }
    int batches = samples / BATCH;
    double *batch = malloc(sizeof(double) * batches);
    double cpu = thread_cpu_ns();
    for (int b = 0; b < batches; b++) {
        double t = now_ns();
        for (int i = 0; i < BATCH; i++) if (pair(size)) return 1;
        batch[b] = (now_ns() - t) / BATCH;
    }
    cpu = (thread_cpu_ns() - cpu) / ((double) batches * BATCH);
    qsort(single, samples, sizeof(double), by_value);
    qsort(batch, batches, sizeof(double), by_value);
    printf("{\"size\":%zu,\"first_call_ms\":%.1f,\"pair_median_ns\":%.0f,\"pair_p99_ns\":%.0f,"
           "\"pair_batched_median_ns\":%.0f,\"pair_cpu_ns\":%.0f}\n", size, first_ms, single[samples / 2],
           single[(int) (samples * 0.99)], batch[batches / 2], cpu);
    return 0;
}
