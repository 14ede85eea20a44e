/*
 * first_allocation.c: a program whose first allocation is a large one, right after CUDA's
 * initialisation (cudaFree(0)), as a program that loads its weights first makes it; under
 * `vmmkit run` that allocation also waits for whatever is left of vmmkit's start (docs/cold-path.md,
 * "A process's first allocation on the GPU"). Build against libcudart; run: first_allocation SIZE.
 * Prints one JSON line: the first cudaMalloc of SIZE and a 4 KiB one after it, in us.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int cudaError_t;
cudaError_t cudaMalloc(void **, size_t);
cudaError_t cudaFree(void *);

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: first_allocation SIZE\n");
        return 2;
    }
    size_t size = strtoull(argv[1], NULL, 0);
    cudaFree(0);
    void *first = NULL, *small = NULL;
    double t0 = now_us();
    int rc = cudaMalloc(&first, size);
    double t1 = now_us();
    int rc2 = cudaMalloc(&small, 4096);
    double t2 = now_us();
    printf("{\"first_malloc_us\":%.1f,\"then_4k_us\":%.1f,\"rc\":%d}\n", t1 - t0, t2 - t1, rc ? rc : rc2);
    return rc || rc2;
}
