/*
 * bench_cold.c: what a program pays when it starts: the first large cudaMalloc, and the first
 * classic grow (cudaMalloc bigger, copy, cudaFree the old one). One measurement per process, after
 * one 4 KiB cudaMalloc + cudaFree that starts the runtime (and, under `vmmkit run`, vmmkit's JVM).
 * Usage: bench_cold first SIZE | bench_cold grow FROM TO. Prints one JSON line. BENCH_COLD_IDLE_MS=N
 * sleeps N ms between the warm-up and the timed call; BENCH_COLD_TOUCH=1 writes a small buffer on the
 * device there (see below). BENCH_COLD_COUNTERS=1 adds what the kernel
 * counted around the timed call: this thread's minor page faults and context switches (getrusage),
 * the TLB shootdowns of the whole machine (/proc/interrupts), and the process's threads and how
 * many of them were running just after it (read after the call, so they cost it nothing).
 */
#define _GNU_SOURCE /* RUSAGE_THREAD, RTLD_DEFAULT */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <time.h>

typedef int cudaError_t;
cudaError_t cudaMalloc(void **, size_t);
cudaError_t cudaFree(void *);
cudaError_t cudaMemcpy(void *, const void *, size_t, int);
cudaError_t cudaDeviceSynchronize(void);
enum { DEVICE_TO_DEVICE = 3 };

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* The machine's TLB shootdowns so far: the sum of /proc/interrupts' TLB line, -1 if unreadable. */
static long long tlb_shootdowns(void) {
    FILE *f = fopen("/proc/interrupts", "r");
    if (!f) return -1;
    char line[8192];
    long long sum = -1;
    while (fgets(line, sizeof line, f)) {
        char *p = line;
        while (*p == ' ') p++;
        if (strncmp(p, "TLB:", 4) != 0) continue;
        sum = 0;
        for (p += 4;;) {
            char *end;
            long long v = strtoll(p, &end, 10);
            if (end == p) break;
            sum += v;
            p = end;
        }
    }
    fclose(f);
    return sum;
}

/* The process's threads, and how many were running (state R) when read, with their names in
 * names (comma-separated, cut at size). */
static void count_threads(int *all, int *running, char *names, size_t size) {
    *all = *running = 0;
    names[0] = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        (*all)++;
        char path[300], stat[512];
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t n = fread(stat, 1, sizeof stat - 1, f);
        fclose(f);
        stat[n] = 0;
        char *close = strrchr(stat, ')'); /* the state follows the command name's ")" */
        char *open = strchr(stat, '(');
        if (close && open && close[1] == ' ' && close[2] == 'R') {
            (*running)++;
            size_t used = strlen(names);
            snprintf(names + used, size - used, "%s%.*s", used ? "," : "", (int)(close - open - 1), open + 1);
        }
    }
    closedir(d);
}

static int fail(const char *what, cudaError_t e) {
    fprintf(stderr, "bench_cold: %s failed (%d)\n", what, e);
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[1], "first") != 0 && strcmp(argv[1], "grow") != 0) ||
        (strcmp(argv[1], "grow") == 0 && argc < 4)) {
        fprintf(stderr, "usage: bench_cold first SIZE | bench_cold grow FROM TO\n");
        return 2;
    }
    void *warm = NULL;
    cudaError_t e;
    /* Each warm-up step is timed: the time from the warm-up's last driver call to the large
     * request's first one decides how fast the driver answers it (see docs/cold-path.md). */
    double w0 = now_us();
    if ((e = cudaMalloc(&warm, 4096)) != 0) return fail("warm-up cudaMalloc", e);
    double w1 = now_us();
    if ((e = cudaFree(warm)) != 0) return fail("warm-up cudaFree", e);
    double w2 = now_us();
    if ((e = cudaDeviceSynchronize()) != 0) return fail("cudaDeviceSynchronize", e);
    double w3 = now_us();
    /* BENCH_COLD_TOUCH=1: then a small buffer is written on the device (cudaMemset, a kernel the
     * allocator does not see) and the device synchronised, so the timed call follows device work in
     * every process, whether the warm-up pair reached the driver or not. */
    const char *touch = getenv("BENCH_COLD_TOUCH");
    if (touch && atoi(touch) > 0) {
        cudaError_t (*memset_on_device)(void *, int, size_t) =
                (cudaError_t (*)(void *, int, size_t))dlsym(RTLD_DEFAULT, "cudaMemset");
        void *small = NULL;
        if (!memset_on_device) return fail("cudaMemset (not found)", 1);
        if ((e = cudaMalloc(&small, 4096)) != 0) return fail("cudaMalloc (touch)", e);
        if ((e = memset_on_device(small, 0, 4096)) != 0) return fail("cudaMemset (touch)", e);
        if ((e = cudaDeviceSynchronize()) != 0) return fail("cudaDeviceSynchronize (touch)", e);
    }
    const char *idle_ms = getenv("BENCH_COLD_IDLE_MS"); /* an idle spell before the timed call */
    if (idle_ms && atoi(idle_ms) > 0) {
        struct timespec pause = {atoi(idle_ms) / 1000, (atoi(idle_ms) % 1000) * 1000000L};
        nanosleep(&pause, NULL);
    }
    /* A busy spell instead: cudaDeviceSynchronize every 100 us for this long, so the driver never
     * idles (an idle driver answers slower) while the process's start-up work settles. */
    const char *busy_ms = getenv("BENCH_COLD_BUSY_MS");
    if (busy_ms && atoi(busy_ms) > 0) {
        double until = now_us() + 1000.0 * atoi(busy_ms);
        struct timespec gap = {0, 100000L};
        while (now_us() < until) {
            if ((e = cudaDeviceSynchronize()) != 0) return fail("cudaDeviceSynchronize (busy)", e);
            nanosleep(&gap, NULL);
        }
    }

    if (strcmp(argv[1], "first") == 0) {
        size_t size = strtoull(argv[2], NULL, 0);
        void *p = NULL;
        int counters = getenv("BENCH_COLD_COUNTERS") && atoi(getenv("BENCH_COLD_COUNTERS")) > 0;
        struct rusage before, after;
        long long tlb_before = counters ? tlb_shootdowns() : -1;
        if (counters) getrusage(RUSAGE_THREAD, &before);
        double t = now_us();
        if ((e = cudaMalloc(&p, size)) != 0) return fail("cudaMalloc", e);
        double us = now_us() - t;
        char extra[512] = "";
        if (counters) {
            getrusage(RUSAGE_THREAD, &after);
            long long tlb_after = tlb_shootdowns();
            int threads, running;
            char names[160];
            count_threads(&threads, &running, names, sizeof names);
            snprintf(extra, sizeof extra,
                     ",\"minor_faults\":%ld,\"voluntary_switches\":%ld,\"involuntary_switches\":%ld,"
                     "\"tlb_shootdowns\":%lld,\"threads\":%d,\"threads_running_after\":%d,\"running_names\":\"%s\"",
                     after.ru_minflt - before.ru_minflt, after.ru_nvcsw - before.ru_nvcsw,
                     after.ru_nivcsw - before.ru_nivcsw, tlb_before < 0 ? -1 : tlb_after - tlb_before, threads, running, names);
        }
        uintptr_t address = (uintptr_t)p;
        printf("{\"test\":\"first\",\"size\":%zu,\"first_malloc_us\":%.1f,\"warmup_malloc_us\":%.1f,"
               "\"warmup_free_us\":%.1f,\"warmup_sync_us\":%.1f,\"address_alignment_mib\":%llu,\"start_monotonic_us\":%.1f%s}\n",
               size, us, w1 - w0, w2 - w1, w3 - w2, (unsigned long long)((address & -address) >> 20), t, extra);
        return cudaFree(p) != 0;
    }
    size_t from = strtoull(argv[2], NULL, 0), to = strtoull(argv[3], NULL, 0);
    void *old = NULL, *grown = NULL;
    if ((e = cudaMalloc(&old, from)) != 0) return fail("cudaMalloc (old)", e);
    if ((e = cudaDeviceSynchronize()) != 0) return fail("cudaDeviceSynchronize", e);
    double t = now_us();
    if ((e = cudaMalloc(&grown, to)) != 0) return fail("cudaMalloc (grown)", e);
    double malloc_us = now_us() - t;
    if ((e = cudaMemcpy(grown, old, from, DEVICE_TO_DEVICE)) != 0) return fail("cudaMemcpy", e);
    if ((e = cudaFree(old)) != 0) return fail("cudaFree (old)", e);
    double us = now_us() - t;
    printf("{\"test\":\"grow\",\"from\":%zu,\"to\":%zu,\"grow_us\":%.1f,\"grow_malloc_us\":%.1f}\n", from, to, us, malloc_us);
    return cudaFree(grown) != 0;
}
