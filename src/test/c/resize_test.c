/*
 * resize_test.c: a CUDA program that resizes device buffers, run under `vmmkit run`. It uses the
 * runtime API only and declares what it uses, so it builds against the stand-in runtime
 * (fake_cudart.c, by InterposeEndToEndTest) and against the real libcudart (scripts/gpu/zero-copy.sh).
 *
 *   resize_test pattern [MiB...]     the seed's pattern: malloc bigger, copy the whole old buffer,
 *                                    free old (cudaMemcpy, cudaMemcpyAsync and cudaMemcpyDefault);
 *                                    the data is checked bit for bit. With EXPECT_NO_RUNTIME_COPIES=1
 *                                    (stand-in only) the device-to-device copies must not reach the
 *                                    runtime.
 *   resize_test realloc              vmmkit_realloc: grow, shrink, NULL, size 0, a foreign pointer
 *   resize_test bench MODE MiB REPS  times one resize of a MiB buffer to twice its size, REPS times;
 *                                    MODE: realloc | copy (cudaMalloc+cudaMemcpy D2D+cudaFree) |
 *                                    async (cudaMallocAsync+cudaMemcpyAsync+cudaFreeAsync) | pattern
 *                                    (as copy, through whatever the preload does). Prints one line:
 *                                    "bench MODE MiB median_us min_us first_us", after checking the
 *                                    data once (the first resize of a process finds no cached memory).
 * Prints "ok <scenario>" and exits 0, or exits 1 at the first failure.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_runtime_subset.h"

static const char *scenario = "";
#define CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "FAIL %s: %s (resize_test.c:%d)\n", scenario, #cond, __LINE__); exit(1); } } while (0)
#define MIB ((size_t) 1 << 20)

/* Found at run time: the shim's export, and the stand-in's counter (absent on a real runtime). */
static cudaError_t (*vmmkit_realloc)(void **, size_t);
static long (*runtime_copies)(void);

#include "device_pattern.h"

static long copies_so_far(void) { return runtime_copies ? runtime_copies() : 0; }

/* ---- the seed's pattern ---- */

static void *grow_by_copy(void *old, size_t bytes, int how) {
    void *bigger = NULL;
    CHECK(cudaMalloc(&bigger, 2 * bytes) == 0);
    if (how == 0) CHECK(cudaMemcpy(bigger, old, bytes, D2D) == 0);
    else if (how == 1) CHECK(cudaMemcpyAsync(bigger, old, bytes, D2D, NULL) == 0);
    else CHECK(cudaMemcpy(bigger, old, bytes, DEFAULT_KIND) == 0);
    CHECK(cudaFree(old) == 0);
    return bigger;
}

static void pattern(int count, char **mib) {
    static char *defaults[] = {"4", "6", "64", "40.5", "1.5"};
    if (count == 0) { count = 5; mib = defaults; }
    int strict = getenv("EXPECT_NO_RUNTIME_COPIES") && strcmp(getenv("EXPECT_NO_RUNTIME_COPIES"), "1") == 0;
    for (int i = 0; i < count; i++) {
        size_t bytes = (size_t) (atof(mib[i]) * MIB) & ~(size_t) 7;
        for (int how = 0; how < 3; how++) {
            void *buffer = NULL;
            CHECK(cudaMalloc(&buffer, bytes) == 0);
            upload(buffer, bytes, 17 + how);
            long before = copies_so_far();
            void *bigger = grow_by_copy(buffer, bytes, how);
            if (strict) CHECK(copies_so_far() == before);
            check(bigger, bytes, 17 + how);
            upload(bigger, 2 * bytes, 99); /* the whole new buffer is usable */
            check(bigger, 2 * bytes, 99);
            CHECK(cudaFree(bigger) == 0);
        }
    }
}

/* ---- vmmkit_realloc ---- */

void *fake_cudart_own_malloc(size_t) __attribute__((weak));

static void realloc_semantics(void) {
    CHECK(vmmkit_realloc);
    long before = copies_so_far();
    void *p = NULL;
    CHECK(vmmkit_realloc(&p, 8 * MIB) == 0 && p); /* NULL: as cudaMalloc */
    upload(p, 8 * MIB, 1);
    void *first = p;
    CHECK(vmmkit_realloc(&p, 24 * MIB) == 0);
    CHECK(p == first); /* nothing behind it yet: grown in place */
    check(p, 8 * MIB, 1);
    upload(p, 24 * MIB, 2);

    void *neighbour = NULL;
    CHECK(cudaMalloc(&neighbour, 8 * MIB) == 0);
    upload(neighbour, 8 * MIB, 3);
    CHECK(vmmkit_realloc(&p, 60 * MIB + 4096) == 0); /* the neighbour is behind it: moves, remapped, not copied */
    check(p, 24 * MIB, 2);
    check(neighbour, 8 * MIB, 3);
    upload(p, 60 * MIB + 4096, 4);

    void *kept = p;
    CHECK(vmmkit_realloc(&p, 10 * MIB) == 0);
    CHECK(p == kept); /* shrinks in place */
    check(p, 10 * MIB, 4);

    CHECK(vmmkit_realloc(&p, 0) == 1 && p == kept); /* size 0: cudaErrorInvalidValue, unchanged */
    CHECK(vmmkit_realloc(NULL, 4096) == 1);
    check(p, 10 * MIB, 4);

    if (fake_cudart_own_malloc) { /* a pointer vmmkit never saw */
        void *foreign = fake_cudart_own_malloc(MIB), *same = foreign;
        CHECK(vmmkit_realloc(&foreign, 2 * MIB) == 1 && foreign == same);
        CHECK(cudaFree(foreign) == 0); /* still the runtime's */
    }
    void *inside = (char *) p + 4096;
    CHECK(vmmkit_realloc(&inside, 2 * MIB) == 1); /* not the start of an allocation */
    CHECK(copies_so_far() == before); /* realloc never calls the runtime's copy */
    CHECK(cudaFree(p) == 0);
    CHECK(cudaFree(neighbour) == 0);
}

/* ---- timings ---- */

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

static void bench(const char *mode, size_t mib, int reps) {
    size_t bytes = mib * MIB;
    double *us = calloc(reps, sizeof *us);
    CHECK(us && reps > 0);
    int is_async = strcmp(mode, "async") == 0;
    for (int r = 0; r < reps; r++) {
        void *p = NULL, *q = NULL;
        if (is_async) CHECK(cudaMallocAsync(&p, bytes, NULL) == 0);
        else CHECK(cudaMalloc(&p, bytes) == 0);
        if (r == 0) upload(p, bytes, 5);
        CHECK(cudaDeviceSynchronize() == 0);
        double t0 = now_us();
        if (strcmp(mode, "realloc") == 0) {
            CHECK(vmmkit_realloc && vmmkit_realloc(&p, 2 * bytes) == 0);
            q = p;
        } else if (is_async) {
            CHECK(cudaMallocAsync(&q, 2 * bytes, NULL) == 0);
            CHECK(cudaMemcpyAsync(q, p, bytes, D2D, NULL) == 0);
            CHECK(cudaFreeAsync(p, NULL) == 0);
        } else { /* copy and pattern: the seed's pattern, the preload decides what it becomes */
            CHECK(cudaMalloc(&q, 2 * bytes) == 0);
            CHECK(cudaMemcpy(q, p, bytes, D2D) == 0);
            CHECK(cudaFree(p) == 0);
        }
        CHECK(cudaDeviceSynchronize() == 0);
        us[r] = now_us() - t0;
        if (r == 0) check(q, bytes, 5);
        if (is_async) CHECK(cudaFreeAsync(q, NULL) == 0);
        else CHECK(cudaFree(q) == 0);
        CHECK(cudaDeviceSynchronize() == 0);
    }
    double first = us[0];
    qsort(us, reps, sizeof *us, by_value);
    printf("bench %s %zu %.1f %.1f %.1f\n", mode, mib, us[reps / 2], us[0], first);
    free(us);
}

int main(int argc, char **argv) {
    vmmkit_realloc = (cudaError_t (*)(void **, size_t)) dlsym(RTLD_DEFAULT, "vmmkit_realloc");
    runtime_copies = (long (*)(void)) dlsym(RTLD_DEFAULT, "fake_cudart_device_copies");
    if (argc < 2) {
        fprintf(stderr, "usage: resize_test pattern [MiB...] | realloc | bench MODE MiB REPS\n");
        return 2;
    }
    scenario = argv[1];
    if (strcmp(argv[1], "pattern") == 0) pattern(argc - 2, argv + 2);
    else if (strcmp(argv[1], "realloc") == 0) realloc_semantics();
    else if (strcmp(argv[1], "bench") == 0 && argc == 5) bench(argv[2], strtoull(argv[3], NULL, 10), atoi(argv[4]));
    else { fprintf(stderr, "unknown scenario %s\n", argv[1]); return 2; }
    if (strcmp(argv[1], "bench") != 0) printf("ok %s\n", scenario);
    return 0;
}
