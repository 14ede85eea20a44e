/*
 * bench_sync_beside.c: what a device synchronisation running in a loop on another thread costs the
 * thread that allocates, as vmmkit's fence thread synchronises while a program frees with cudaFree.
 * Three figures, each the median of single timed calls:
 *   get_device_ns          cudaGetDevice (the shim calls it in every cudaMalloc and cudaFree), alone
 *   get_device_beside_ns   the same while a second thread calls cudaDeviceSynchronize in a loop
 *   sync_ns                one cudaDeviceSynchronize on the idle device (the second thread's loop)
 *   line_transfer_ns       half the round trip of a value passed between two threads through two
 *                          cache lines: what each line a free shares with the fence's thread costs
 * Usage: bench_sync_beside [CALLS]. Prints one JSON line.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int cudaError_t;
cudaError_t cudaGetDevice(int *);
cudaError_t cudaDeviceSynchronize(void);
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

static volatile int stop;
static volatile long syncs;
static double sync_total_ns;

static void *synchronise(void *unused) {
    (void) unused;
    while (!stop) {
        double t = now_ns();
        cudaDeviceSynchronize();
        sync_total_ns += now_ns() - t;
        syncs++;
    }
    return NULL;
}

static double median_get_device(double *samples, int calls) {
    int device;
    for (int i = 0; i < calls; i++) {
        double t = now_ns();
        cudaGetDevice(&device);
        samples[i] = now_ns() - t;
    }
    qsort(samples, calls, sizeof(double), by_value);
    return samples[calls / 2];
}

/* Two lines, 128 bytes apart; each written by one thread, read by the other. */
static struct { volatile long value; char pad[120]; } ping, pong;

static void *echo(void *arg) {
    long rounds = (long) (intptr_t) arg;
    for (long i = 1; i <= rounds; i++) {
        while (ping.value != i) { }
        pong.value = i;
    }
    return NULL;
}

static double line_transfer_ns(long rounds) {
    pthread_t t;
    pthread_create(&t, NULL, echo, (void *) (intptr_t) rounds);
    double start = now_ns();
    for (long i = 1; i <= rounds; i++) {
        ping.value = i;
        while (pong.value != i) { }
    }
    double ns = (now_ns() - start) / rounds / 2;
    pthread_join(t, NULL);
    return ns;
}

int main(int argc, char **argv) {
    int calls = argc > 1 ? atoi(argv[1]) : 200000;
    if (cudaFree(NULL) != 0) { fprintf(stderr, "bench_sync_beside: the runtime did not start\n"); return 1; }
    double *samples = malloc(sizeof(double) * calls);
    median_get_device(samples, calls); /* warm-up */
    double alone = median_get_device(samples, calls);
    pthread_t syncer;
    pthread_create(&syncer, NULL, synchronise, NULL);
    while (syncs < 100) { }
    double beside = median_get_device(samples, calls);
    stop = 1;
    pthread_join(syncer, NULL);
    double transfer = line_transfer_ns(1000000);
    printf("{\"get_device_ns\":%.0f,\"get_device_beside_ns\":%.0f,\"sync_ns\":%.0f,\"line_transfer_ns\":%.0f}\n",
           alone, beside, syncs ? sync_total_ns / syncs : 0, transfer);
    return 0;
}
