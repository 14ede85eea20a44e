/*
 * parallel_grant.c: whether the driver grants access (cuMemSetAccess) to several handles of one
 * backing at once when several threads ask, so that a large first backing or a resume could take
 * its setAccess, the largest of its three calls, on a few threads instead of one.
 * Build: gcc -O2 -o parallel_grant scripts/gpu/parallel_grant.c -ldl -lpthread
 * Run: parallel_grant TOTAL_GIB CYCLES GAP_MS FIRST_MODE MODE...; a MODE is
 *   one        one handle created, mapped and granted in turn (as now);
 *   serial-N   N handles of TOTAL/N, created, mapped and granted in turn on one thread;
 *   handles-N  the same handles granted at once by N threads (the caller and N - 1 helpers, which
 *              spin through every mode, so that every mode meets the same busy cores).
 * One handle cannot be granted in pieces instead: cuMemMap refuses an offset into a handle
 * (CUDA_ERROR_NOT_SUPPORTED, docs/generation-traces.md).
 * FIRST_MODE backs the process's first allocation (cycle 0, the first-allocation case); the MODEs
 * then take turns in each cycle, each after the same release and GAP_MS without calls (the resume
 * case). Prints "grant total_gib=T mode=M cycle=C back_us=B create_us=.. map_us=.. grant_us=..".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>
#define PROGRAM "parallel_grant"
#include "cuda_driver_subset.h"

#define MAX_PIECES 16

static CUcontext context;
static CUdeviceptr base;
static size_t total_bytes;
static CUmemHandle handles[MAX_PIECES];

/* The helpers' job: grant handles 1..pieces-1 of the current backing; generation counts jobs. */
static atomic_int generation;
static atomic_int granted;
static atomic_int stop;
static int pieces;

static void grant_piece(int i) {
    CUmemAccessDesc rw = {{1, 0}, 3};
    size_t piece = total_bytes / pieces;
    check("cuMemSetAccess", cuMemSetAccess(base + i * piece, piece, &rw, 1));
}

static void *helper(void *arg) {
    int index = (int)(long)arg;
    check("cuCtxSetCurrent", cuCtxSetCurrent(context));
    int seen = 0;
    for (;;) {
        int g;
        while ((g = atomic_load(&generation)) == seen && !atomic_load(&stop)) { }
        if (atomic_load(&stop)) return NULL;
        seen = g;
        if (index < pieces) {
            grant_piece(index);
            atomic_fetch_add(&granted, 1);
        }
    }
}

static void back(const char *mode, int n, int cycle) {
    CUmemAccessDesc rw = {{1, 0}, 3};
    pieces = n;
    size_t piece = total_bytes / n;
    double t = now_us();
    for (int h = 0; h < pieces; h++) {
        check("cuMemCreate", cuMemCreate(&handles[h], piece, device_memory_prop(), 0));
    }
    double created = now_us();
    for (int i = 0; i < n; i++) check("cuMemMap", cuMemMap(base + i * piece, piece, 0, handles[i], 0));
    double mapped = now_us();
    if (strcmp(mode, "one") == 0) {
        check("cuMemSetAccess", cuMemSetAccess(base, total_bytes, &rw, 1));
    } else if (strcmp(mode, "serial") == 0) {
        for (int i = 0; i < n; i++) grant_piece(i);
    } else {
        atomic_store(&granted, 0);
        atomic_fetch_add(&generation, 1);
        grant_piece(0);
        while (atomic_load(&granted) < n - 1) { }
    }
    double done = now_us();
    printf("grant total_gib=%.0f mode=%s-%d cycle=%d back_us=%.1f create_us=%.1f map_us=%.1f grant_us=%.1f\n",
           total_bytes / (double)(1ull << 30), mode, n, cycle, done - t, created - t, mapped - created,
           done - mapped);
    fflush(stdout);
}

static void release_range(void) {
    check("cuCtxSynchronize", cuCtxSynchronize());
    check("cuMemUnmap", cuMemUnmap(base, total_bytes));
    for (int h = 0; h < pieces; h++) check("cuMemRelease", cuMemRelease(handles[h]));
}

static int parse(const char *text, char *mode, int *n) {
    if (strcmp(text, "one") == 0) { strcpy(mode, "one"); *n = 1; return 1; }
    if (sscanf(text, "%15[a-z]-%d", mode, n) != 2 || *n < 1 || *n > MAX_PIECES) return 0;
    if (strcmp(mode, "serial") && strcmp(mode, "handles")) return 0;
    return total_bytes % ((size_t)*n << 21) == 0;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: parallel_grant TOTAL_GIB CYCLES GAP_MS FIRST_MODE MODE...\n");
        return 2;
    }
    total_bytes = strtoull(argv[1], NULL, 0) << 30;
    int cycles = atoi(argv[2]);
    int gap_ms = atoi(argv[3]);
    char mode[16];
    int n, most = 1;
    for (int m = 4; m < argc; m++) {
        if (!parse(argv[m], mode, &n)) { fprintf(stderr, "parallel_grant: bad mode %s\n", argv[m]); return 2; }
        if (n > most) most = n;
    }
    void *lib = open_driver(&context);
    CUdeviceptr small;
    CUresult (*cuMemAlloc)(CUdeviceptr *, size_t) = sym(lib, "cuMemAlloc_v2");
    check("cuMemAlloc", cuMemAlloc(&small, 4096));
    check("cuMemAddressReserve", cuMemAddressReserve(&base, total_bytes, 0, 0, 0));
    pthread_t tids[MAX_PIECES];
    for (int i = 1; i < most; i++) pthread_create(&tids[i], NULL, helper, (void *)(long)i);
    usleep(20000);
    parse(argv[4], mode, &n);
    back(mode, n, 0);
    release_range();
    for (int cycle = 1; cycle <= cycles; cycle++) {
        for (int m = 5; m < argc; m++) {
            parse(argv[m], mode, &n);
            usleep(gap_ms * 1000);
            back(mode, n, cycle);
            release_range();
        }
    }
    atomic_store(&stop, 1);
    for (int i = 1; i < most; i++) pthread_join(tids[i], NULL);
    return 0;
}
