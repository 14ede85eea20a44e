/*
 * create_after_release.c: why a resume's first cuMemCreate is slow. After a pause released a tag's
 * handles, the next large create took 2.3-3.0 ms for 8 GiB and 16-19 ms for 40 GiB on an H100,
 * where a process's first 4 GiB create takes 110-214 us. Is that work the driver left over from the
 * release (paid by whichever create comes next, of any size, or done by itself given time), or work
 * on the new memory (paid per byte created)? No vmmkit: the driver API alone, through libcuda.so.1.
 * One process per line:
 *   create_after_release MODE SIZE EXPORTABLE [PARTS]
 * creates a handle of SIZE bytes (exportable as a POSIX descriptor when EXPORTABLE is 1, as vmmkit's
 * untagged memory is; plain and GPUDirect RDMA capable when it is 2, as torch_memory_saver's), maps it, grants access, writes every byte (cuMemsetD8), synchronises, unmaps and releases
 * it, as a pause does (the release timed); then, by MODE:
 *   again       creates SIZE again at once, timed
 *   small-first creates 2 MiB first (timed), releases it, then SIZE (timed)
 *   gap         sleeps 1 s, then creates SIZE (timed)
 *   small-gap   creates and releases 2 MiB at once (timed), sleeps 1 s, then creates SIZE (timed)
 *   untouched   as again, the first handle never written (only created, mapped and released)
 *   fresh       no first handle: creates SIZE once, timed (a process's first create of that size)
 *   split-gap   as gap, SIZE created as PARTS (4) handles one after another (timed together)
 *   split-again as again, SIZE created as PARTS handles one after another (timed together)
 *   threads-gap as split-gap, the PARTS handles created on PARTS threads at once (wall time)
 *   release-threads  the first SIZE made as PARTS handles and released on PARTS threads at once
 *               (wall time, in release_us), then as gap
 * Then maps and grants access to the last handle, timed. The driver's free memory is printed after
 * each step. Prints one JSON line. Built and run by scripts/gpu/pause-resume.sh (extra
 * "create-after-release").
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROGRAM "create_after_release"
#include "cuda_driver_subset.h"

static CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
static CUresult (*cuMemGetInfo)(size_t *, size_t *);

static CUmemAllocationProp prop;

static double free_gib(void) {
    size_t free_bytes, total;
    check("cuMemGetInfo", cuMemGetInfo(&free_bytes, &total));
    return free_bytes / (double)(1ull << 30);
}

/* Creates a handle of size bytes; returns the microseconds it took. */
static double timed_create(CUmemHandle *handle, size_t size) {
    double t = now_us();
    check("cuMemCreate", cuMemCreate(handle, size, &prop, 0));
    return now_us() - t;
}

/* One thread's part: creates (or releases) one handle of part bytes. */
typedef struct { CUmemHandle handle; size_t bytes; int release; } Part;

static void *run_part(void *arg) {
    Part *p = arg;
    if (p->release) check("cuMemRelease", cuMemRelease(p->handle));
    else check("cuMemCreate", cuMemCreate(&p->handle, p->bytes, &prop, 0));
    return NULL;
}

/* Runs parts[0..n) on n threads at once (or one after another when !threads); returns the wall microseconds. */
static double run_parts(Part *parts, int n, int threads) {
    pthread_t ids[64];
    double t = now_us();
    for (int i = 0; i < n; i++) {
        if (!threads) run_part(&parts[i]);
        else if (pthread_create(&ids[i], NULL, run_part, &parts[i]) != 0) exit(1);
    }
    for (int i = 0; threads && i < n; i++) pthread_join(ids[i], NULL);
    return now_us() - t;
}

static void pause_ms(int ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

int main(int argc, char **argv) {
    static const char *const modes[] = {"again", "small-first", "gap", "small-gap", "untouched", "fresh", "split-gap",
                                        "split-again", "threads-gap", "release-threads"};
    int known = 0;
    for (size_t i = 0; argc >= 4 && i < sizeof modes / sizeof *modes; i++) known |= strcmp(argv[1], modes[i]) == 0;
    if (!known) { fprintf(stderr, "usage: create_after_release MODE SIZE EXPORTABLE (MODE: see the comment at the top)\n"); return 2; }
    const char *mode = argv[1];
    size_t size = strtoull(argv[2], NULL, 0);
    int parts_n = argc > 4 ? atoi(argv[4]) : 4;
    if (parts_n < 1 || parts_n > 64 || size % ((size_t)parts_n << 21) != 0) { fprintf(stderr, "create_after_release: bad PARTS\n"); return 2; }
    size_t part = size / parts_n;
    Part parts[64];
    CUcontext ctx;
    void *lib = open_driver(&ctx);
    cuMemsetD8 = sym(lib, "cuMemsetD8_v2");
    cuMemGetInfo = sym(lib, "cuMemGetInfo_v2");
    memset(&prop, 0, sizeof prop);
    prop.type = 1;
    prop.requestedHandleTypes = atoi(argv[3]) == 1 ? 1 : 0; /* CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1 */
    prop.allocFlags.gpuDirectRDMACapable = atoi(argv[3]) == 2;
    prop.location.type = 1;
    CUmemAccessDesc access = {{1, 0}, 3};
    CUdeviceptr va;
    check("cuMemAddressReserve", cuMemAddressReserve(&va, size, 0, 0, 0));
    double free_start = free_gib();

    CUmemHandle handle, small;
    double first_create_us = 0, release_us = 0, small_us = -1;
    int fresh = strcmp(mode, "fresh") == 0;
    int release_split = strcmp(mode, "release-threads") == 0;
    if (!fresh && !release_split) {
        first_create_us = timed_create(&handle, size);
        check("cuMemMap", cuMemMap(va, size, 0, handle, 0));
        check("cuMemSetAccess", cuMemSetAccess(va, size, &access, 1));
        if (strcmp(mode, "untouched") != 0) check("cuMemsetD8", cuMemsetD8(va, 0x5a, size));
        check("cuCtxSynchronize", cuCtxSynchronize());
        check("cuMemUnmap", cuMemUnmap(va, size));
        double t = now_us();
        check("cuMemRelease", cuMemRelease(handle));
        release_us = now_us() - t;
    } else if (release_split) {
        for (int i = 0; i < parts_n; i++) {
            parts[i] = (Part){0, part, 0};
            run_part(&parts[i]);
            check("cuMemMap", cuMemMap(va + i * part, part, 0, parts[i].handle, 0));
        }
        check("cuMemSetAccess", cuMemSetAccess(va, size, &access, 1));
        check("cuMemsetD8", cuMemsetD8(va, 0x5a, size));
        check("cuCtxSynchronize", cuCtxSynchronize());
        check("cuMemUnmap", cuMemUnmap(va, size));
        for (int i = 0; i < parts_n; i++) parts[i].release = 1;
        release_us = run_parts(parts, parts_n, 1);
    }
    double free_released = free_gib();
    if (strncmp(mode, "small-", 6) == 0) {
        small_us = timed_create(&small, 2u << 20);
        check("cuMemRelease", cuMemRelease(small));
    }
    if (strstr(mode, "gap") || release_split) pause_ms(1000);
    int split = strncmp(mode, "split", 5) == 0 || strncmp(mode, "threads", 7) == 0;
    double create_us;
    if (split) {
        for (int i = 0; i < parts_n; i++) parts[i] = (Part){0, part, 0};
        create_us = run_parts(parts, parts_n, strncmp(mode, "threads", 7) == 0);
    } else {
        create_us = timed_create(&handle, size);
    }
    double t0 = now_us();
    if (split) {
        for (int i = 0; i < parts_n; i++) check("cuMemMap", cuMemMap(va + i * part, part, 0, parts[i].handle, 0));
    } else {
        check("cuMemMap", cuMemMap(va, size, 0, handle, 0));
    }
    double t1 = now_us();
    check("cuMemSetAccess", cuMemSetAccess(va, size, &access, 1));
    double t2 = now_us();
    double free_end = free_gib();
    printf("{\"test\":\"create-after-release\",\"mode\":\"%s\",\"size_gib\":%.2f,\"exportable\":%d,\"rdma\":%d,\"parts\":%d,"
           "\"first_create_us\":%.1f,\"release_us\":%.1f,\"small_create_us\":%.1f,\"create_us\":%.1f,"
           "\"map_us\":%.1f,\"set_access_us\":%.1f,\"free_gib_start\":%.2f,\"free_gib_released\":%.2f,\"free_gib_end\":%.2f}\n",
           mode, size / (double)(1ull << 30), prop.requestedHandleTypes, prop.allocFlags.gpuDirectRDMACapable, split || release_split ? parts_n : 1, first_create_us, release_us, small_us,
           create_us, t1 - t0, t2 - t1, free_start, free_released, free_end);
    return 0;
}
