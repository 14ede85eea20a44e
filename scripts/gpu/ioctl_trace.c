/*
 * ioctl_trace.c: an LD_PRELOAD library that times every ioctl the process makes (the CUDA driver
 * talks to the kernel module through them) and writes them at exit, one line each:
 *   start_us duration_us request_hex thread_id
 * start_us is CLOCK_MONOTONIC, as bench_cold's start_monotonic_us, so the ioctls inside one timed call
 * can be picked out. IOCTL_TRACE_DIR=DIR: each process writes DIR/ioctl.PID (nothing when unset).
 * Build: gcc -O2 -shared -fPIC -o ioctl_trace.so scripts/gpu/ioctl_trace.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_EVENTS 400000

typedef struct { double start_us, duration_us; unsigned long request; long tid; } Event;
static Event events[MAX_EVENTS];
static volatile int count;
static int (*real_ioctl)(int, unsigned long, ...);

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int ioctl(int fd, unsigned long request, ...) {
    va_list args;
    va_start(args, request);
    void *arg = va_arg(args, void *);
    va_end(args);
    if (!real_ioctl) real_ioctl = (int (*)(int, unsigned long, ...))dlsym(RTLD_NEXT, "ioctl");
    double t0 = now_us();
    int result = real_ioctl(fd, request, arg);
    double t1 = now_us();
    int i = __sync_fetch_and_add(&count, 1);
    if (i < MAX_EVENTS) events[i] = (Event){t0, t1 - t0, request, syscall(SYS_gettid)};
    return result;
}

__attribute__((destructor)) static void write_events(void) {
    const char *dir = getenv("IOCTL_TRACE_DIR");
    if (!dir) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/ioctl.%d", dir, (int)getpid());
    FILE *f = fopen(path, "w");
    if (!f) return;
    int n = count < MAX_EVENTS ? count : MAX_EVENTS;
    for (int i = 0; i < n; i++)
        fprintf(f, "%.1f %.1f %lx %ld\n", events[i].start_us, events[i].duration_us, events[i].request, events[i].tid);
    fclose(f);
}
