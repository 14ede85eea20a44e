/*
 * overlap_backing.c: whether the driver runs one thread's cuMemCreate beside another thread's
 * cuMemMap and cuMemSetAccess, so that backing a large range in pieces, a helper creating piece
 * i + 1 while the caller maps and grants piece i, takes less time than one handle created, mapped
 * and granted in turn (a resume's or a first allocation's three calls).
 * Build: gcc -O2 -o overlap_backing scripts/gpu/overlap_backing.c -ldl -lpthread
 * Run: overlap_backing TOTAL_GIB CYCLES GAP_MS MODE...; MODE is one-N (N pieces: create all, map
 * all, one setAccess, on one thread) or pipe-N (a spinning helper creates the pieces in turn; the
 * caller maps and grants each as it comes) or wake-N (the same helper, woken by a condition
 * variable at the start, as a parked thread would be). Modes take turns in each cycle, each after
 * the same pause (unmap, release) and GAP_MS without calls, so every mode meets the same driver state.
 * Prints "overlap total_gib=T mode=M cycle=C back_us=B create_us=.. map_grant_us=..".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>
#define PROGRAM "overlap_backing"
#include "cuda_driver_subset.h"

#define MAX_PIECES 64

static CUcontext context;
static CUdeviceptr base;
static size_t total_bytes;
static CUmemHandle handles[MAX_PIECES];
static atomic_int created;          /* pieces the helper has created in this backing */
static atomic_int job_pieces;       /* > 0: the helper's job; 0: none; -1: exit */
static atomic_int job_taken;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static int helper_parks;

static void *helper(void *arg) {
    (void)arg;
    check("cuCtxSetCurrent", cuCtxSetCurrent(context));
    for (;;) {
        int n;
        if (helper_parks) {
            pthread_mutex_lock(&lock);
            while ((n = atomic_load(&job_pieces)) == 0 || atomic_load(&job_taken)) {
                pthread_cond_wait(&wake, &lock);
            }
            pthread_mutex_unlock(&lock);
        } else {
            while ((n = atomic_load(&job_pieces)) == 0 || atomic_load(&job_taken)) { }
        }
        if (n < 0) return NULL;
        atomic_store(&job_taken, 1);
        size_t piece = total_bytes / n;
        for (int i = 0; i < n; i++) {
            check("cuMemCreate", cuMemCreate(&handles[i], piece, device_memory_prop(), 0));
            atomic_store(&created, i + 1);
        }
    }
}

static void back(const char *mode, int n, int cycle) {
    CUmemAccessDesc rw = {{1, 0}, 3};
    size_t piece = total_bytes / n;
    double t = now_us(), made = t;
    if (strcmp(mode, "one") == 0) {
        for (int i = 0; i < n; i++) check("cuMemCreate", cuMemCreate(&handles[i], piece, device_memory_prop(), 0));
        made = now_us();
        for (int i = 0; i < n; i++) check("cuMemMap", cuMemMap(base + i * piece, piece, 0, handles[i], 0));
        check("cuMemSetAccess", cuMemSetAccess(base, total_bytes, &rw, 1));
    } else {
        atomic_store(&created, 0);
        atomic_store(&job_taken, 0);
        if (helper_parks) pthread_mutex_lock(&lock);
        atomic_store(&job_pieces, n);
        if (helper_parks) { pthread_cond_signal(&wake); pthread_mutex_unlock(&lock); }
        for (int i = 0; i < n; i++) {
            while (atomic_load(&created) <= i) { }
            if (i == 0) made = now_us();
            check("cuMemMap", cuMemMap(base + i * piece, piece, 0, handles[i], 0));
            check("cuMemSetAccess", cuMemSetAccess(base + i * piece, piece, &rw, 1));
        }
        atomic_store(&job_pieces, 0);
    }
    double done = now_us();
    printf("overlap total_gib=%.0f mode=%s-%d cycle=%d back_us=%.1f first_create_us=%.1f rest_us=%.1f\n",
           total_bytes / (double)(1ull << 30), mode, n, cycle, done - t, made - t, done - made);
    fflush(stdout);
}

static void pause_range(int n) {
    check("cuCtxSynchronize", cuCtxSynchronize());
    check("cuMemUnmap", cuMemUnmap(base, total_bytes));
    for (int i = 0; i < n; i++) check("cuMemRelease", cuMemRelease(handles[i]));
}

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: overlap_backing TOTAL_GIB CYCLES GAP_MS MODE...\n"); return 2; }
    total_bytes = strtoull(argv[1], NULL, 0) << 30;
    int cycles = atoi(argv[2]);
    int gap_ms = atoi(argv[3]);
    open_driver(&context);
    check("cuMemAddressReserve", cuMemAddressReserve(&base, total_bytes, 0, 0, 0));
    pthread_t tid;
    int uses_helper = 0, uses_wake = 0;
    for (int m = 4; m < argc; m++) {
        if (strncmp(argv[m], "pipe-", 5) == 0) uses_helper = 1;
        if (strncmp(argv[m], "wake-", 5) == 0) uses_helper = uses_wake = 1;
    }
    if (uses_helper && uses_wake) {
        for (int m = 4; m < argc; m++) {
            if (strncmp(argv[m], "pipe-", 5) == 0) {
                fprintf(stderr, "overlap_backing: pipe and wake modes in separate runs\n");
                return 2;
            }
        }
    }
    helper_parks = uses_wake;
    if (uses_helper) pthread_create(&tid, NULL, helper, NULL);
    /* A first backing and pause outside the measurement: the process's first create is slower. */
    back("one", 1, 0);
    pause_range(1);
    for (int cycle = 1; cycle <= cycles; cycle++) {
        for (int m = 4; m < argc; m++) {
            char mode[16];
            int n;
            if (sscanf(argv[m], "%15[a-z]-%d", mode, &n) != 2 || n < 1 || n > MAX_PIECES || total_bytes % n) {
                fprintf(stderr, "overlap_backing: bad mode %s\n", argv[m]);
                return 2;
            }
            usleep(gap_ms * 1000);
            back(strcmp(mode, "one") == 0 ? "one" : mode, n, cycle);
            pause_range(n);
        }
    }
    if (uses_helper) {
        if (helper_parks) pthread_mutex_lock(&lock);
        atomic_store(&job_taken, 0);
        atomic_store(&job_pieces, -1);
        if (helper_parks) { pthread_cond_signal(&wake); pthread_mutex_unlock(&lock); }
        pthread_join(tid, NULL);
    }
    return 0;
}
