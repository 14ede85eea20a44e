/*
 * bench_pair.c: cost of one intercepted cudaMalloc + cudaFree pair on a cache hit (the same size
 * freed and asked again), and of the first call, which starts vmmkit's JVM.
 * Usage: bench_pair [SIZE] [SAMPLES]. Run under `vmmkit run` (or LD_PRELOAD by hand).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int cudaError_t;
cudaError_t cudaMalloc(void **, size_t);
cudaError_t cudaFree(void *);

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

static int pair(size_t size) {
    void *p = NULL;
    return cudaMalloc(&p, size) != 0 || cudaFree(p) != 0;
}

int main(int argc, char **argv) {
    size_t size = argc > 1 ? strtoull(argv[1], NULL, 0) : 4096;
    int samples = argc > 2 ? atoi(argv[2]) : 200000;
    enum { BATCH = 1000 };

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
    for (int b = 0; b < batches; b++) {
        double t = now_ns();
        for (int i = 0; i < BATCH; i++) if (pair(size)) return 1;
        batch[b] = (now_ns() - t) / BATCH;
    }
    qsort(single, samples, sizeof(double), by_value);
    qsort(batch, batches, sizeof(double), by_value);
    printf("{\"size\":%zu,\"first_call_ms\":%.1f,\"pair_median_ns\":%.0f,\"pair_p99_ns\":%.0f,"
           "\"pair_batched_median_ns\":%.0f}\n", size, first_ms, single[samples / 2],
           single[(int) (samples * 0.99)], batch[batches / 2]);
    return 0;
}
