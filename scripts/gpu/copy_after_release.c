/*
 * copy_after_release.c: why a resume straight after its pause restores at 88-89 % of the pinned
 * copy, and at 97-98 % after a second's gap. No vmmkit: the driver API alone, through libcuda.so.1.
 * One process per line:
 *   copy_after_release MODE SIZE [CHUNK_MIB] [STREAMS]
 * pins SIZE bytes of host memory (cuMemHostAlloc) and maps a device buffer B of SIZE, then copies
 * host -> B (the reference, as the pinned copy beside each pause-resume row). Then, but for
 * "reference", it does what a pause does to a handle A of SIZE: create, map, grant access, write
 * every byte, copy A -> host (timed: the backup), unmap and release A (timed). Then, by MODE:
 *   reference   copies host -> B once more
 *   other       copies host -> B at once (does a release slow any copy?)
 *   resume      creates, maps and grants access to a new handle of SIZE, copies host -> it at once
 *   resume-gap  the same after 1 s
 *   resume-sync the same after a cuCtxSynchronize
 *   resume-wait the same with 100 ms between the new handle's access and the copy
 * Each copy is SIZE in CHUNK_MIB pieces (256) alternating over STREAMS streams (2), as vmmkit's
 * copies are; an event after each piece gives the time of each piece (one stream: a time line).
 * Prints one JSON line: GiB/s of each copy (wall, queue to the last stream's end) and of its pieces
 * (first, slowest, median, fastest). Built and run by scripts/gpu/pause-resume.sh (extra
 * "copy-after-release").
 */
#include <stdint.h>
#include <string.h>

#define PROGRAM "copy_after_release"
#include "cuda_driver_subset.h"

typedef void *CUstream;
typedef void *CUevent;
static CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
static CUresult (*cuMemHostAlloc)(void **, size_t, unsigned);
static CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
static CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
static CUresult (*cuStreamCreate)(CUstream *, unsigned);
static CUresult (*cuStreamSynchronize)(CUstream);
static CUresult (*cuEventCreate)(CUevent *, unsigned);
static CUresult (*cuEventRecord)(CUevent, CUstream);
static CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);

#define MAX_PIECES 1024
#define MAX_STREAMS 8
static CUstream streams[MAX_STREAMS];
static CUevent starts[MAX_STREAMS];
static CUevent ends[MAX_PIECES];
static CUmemAllocationProp prop;
static CUmemAccessDesc read_write = {{1, 0}, 3};

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Copies size bytes between host and device (to_device: host -> va) in pieces over n streams;
 * writes a JSON object of its GiB/s to out. */
static void copy(char *out, size_t out_size, const char *name, int to_device, CUdeviceptr va, char *host, size_t size,
                 size_t chunk, int n) {
    int pieces = (int)((size + chunk - 1) / chunk);
    for (int s = 0; s < n; s++) check("cuEventRecord", cuEventRecord(starts[s], streams[s]));
    double t0 = now_us();
    for (int i = 0; i < pieces; i++) {
        size_t at = (size_t)i * chunk, bytes = size - at < chunk ? size - at : chunk;
        CUstream stream = streams[i % n];
        if (to_device) check("cuMemcpyHtoDAsync", cuMemcpyHtoDAsync(va + at, host + at, bytes, stream));
        else check("cuMemcpyDtoHAsync", cuMemcpyDtoHAsync(host + at, va + at, bytes, stream));
        check("cuEventRecord", cuEventRecord(ends[i], stream));
    }
    for (int s = 0; s < n; s++) check("cuStreamSynchronize", cuStreamSynchronize(streams[s]));
    double wall_s = (now_us() - t0) / 1e6;
    double gibps[MAX_PIECES];
    for (int i = 0; i < pieces; i++) {
        float ms;
        check("cuEventElapsedTime", cuEventElapsedTime(&ms, i < n ? starts[i] : ends[i - n], ends[i]));
        size_t bytes = size - (size_t)i * chunk < chunk ? size - (size_t)i * chunk : chunk;
        gibps[i] = bytes / (double)(1ull << 30) / (ms / 1e3);
    }
    double first = gibps[0];
    qsort(gibps, pieces, sizeof *gibps, compare_doubles);
    snprintf(out, out_size, "\"%s\":{\"gibps\":%.1f,\"piece_first\":%.1f,\"piece_min\":%.1f,\"piece_median\":%.1f,\"piece_max\":%.1f}",
             name, size / (double)(1ull << 30) / wall_s, first, gibps[0], gibps[pieces / 2], gibps[pieces - 1]);
}

/* Creates a handle of size bytes, maps it at va with access; returns the handle. */
static CUmemHandle back(CUdeviceptr va, size_t size) {
    CUmemHandle handle;
    check("cuMemCreate", cuMemCreate(&handle, size, &prop, 0));
    check("cuMemMap", cuMemMap(va, size, 0, handle, 0));
    check("cuMemSetAccess", cuMemSetAccess(va, size, &read_write, 1));
    return handle;
}

static void sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

int main(int argc, char **argv) {
    static const char *const modes[] = {"reference", "other", "resume", "resume-gap", "resume-sync", "resume-wait"};
    int known = 0;
    for (size_t i = 0; argc >= 3 && i < sizeof modes / sizeof *modes; i++) known |= strcmp(argv[1], modes[i]) == 0;
    if (!known) { fprintf(stderr, "usage: copy_after_release MODE SIZE [CHUNK_MIB] [STREAMS] (MODE: see the comment at the top)\n"); return 2; }
    const char *mode = argv[1];
    size_t size = strtoull(argv[2], NULL, 0);
    size_t chunk = (argc > 3 ? strtoull(argv[3], NULL, 0) : 256) << 20;
    int n = argc > 4 ? atoi(argv[4]) : 2;
    if (size == 0 || size % (2u << 20) != 0 || chunk == 0 || size / chunk >= MAX_PIECES || n < 1 || n > MAX_STREAMS) {
        fprintf(stderr, "copy_after_release: SIZE must be a multiple of 2 MiB, SIZE / CHUNK under %d, STREAMS 1-%d\n", MAX_PIECES, MAX_STREAMS);
        return 2;
    }
    CUcontext ctx;
    void *lib = open_driver(&ctx);
    cuMemsetD8 = sym(lib, "cuMemsetD8_v2");
    cuMemHostAlloc = sym(lib, "cuMemHostAlloc");
    cuMemcpyHtoDAsync = sym(lib, "cuMemcpyHtoDAsync_v2");
    cuMemcpyDtoHAsync = sym(lib, "cuMemcpyDtoHAsync_v2");
    cuStreamCreate = sym(lib, "cuStreamCreate");
    cuStreamSynchronize = sym(lib, "cuStreamSynchronize");
    cuEventCreate = sym(lib, "cuEventCreate");
    cuEventRecord = sym(lib, "cuEventRecord");
    cuEventElapsedTime = sym(lib, "cuEventElapsedTime");
    memset(&prop, 0, sizeof prop);
    prop.type = 1;
    prop.location.type = 1;
    for (int s = 0; s < n; s++) {
        check("cuStreamCreate", cuStreamCreate(&streams[s], 1 /* non-blocking */));
        check("cuEventCreate", cuEventCreate(&starts[s], 0));
    }
    for (int i = 0; i < MAX_PIECES; i++) check("cuEventCreate", cuEventCreate(&ends[i], 0));

    char *host;
    check("cuMemHostAlloc", cuMemHostAlloc((void **)&host, size, 0));
    memset(host, 0x3c, size);
    CUdeviceptr b, a;
    check("cuMemAddressReserve", cuMemAddressReserve(&b, size, 0, 0, 0));
    check("cuMemAddressReserve", cuMemAddressReserve(&a, size, 0, 0, 0));
    back(b, size);
    check("cuMemsetD8", cuMemsetD8(b, 0, size));
    check("cuCtxSynchronize", cuCtxSynchronize());

    char reference[256], backup[256] = "\"backup\":null", after[256];
    copy(reference, sizeof reference, "reference", 1, b, host, size, chunk, n);
    double release_us = 0;
    if (strcmp(mode, "reference") != 0) {
        CUmemHandle first = back(a, size);
        check("cuMemsetD8", cuMemsetD8(a, 0x5a, size));
        check("cuCtxSynchronize", cuCtxSynchronize());
        copy(backup, sizeof backup, "backup", 0, a, host, size, chunk, n);
        check("cuMemUnmap", cuMemUnmap(a, size));
        double t = now_us();
        check("cuMemRelease", cuMemRelease(first));
        release_us = now_us() - t;
    }
    if (strcmp(mode, "resume-gap") == 0) sleep_ms(1000);
    if (strcmp(mode, "resume-sync") == 0) check("cuCtxSynchronize", cuCtxSynchronize());
    double create_us = 0;
    CUdeviceptr target = b;
    if (strncmp(mode, "resume", 6) == 0) {
        double t = now_us();
        back(a, size);
        create_us = now_us() - t;
        target = a;
        if (strcmp(mode, "resume-wait") == 0) sleep_ms(100);
    }
    copy(after, sizeof after, "after", 1, target, host, size, chunk, n);
    printf("{\"test\":\"copy-after-release\",\"mode\":\"%s\",\"size_gib\":%.2f,\"chunk_mib\":%zu,\"streams\":%d,"
           "\"release_us\":%.1f,\"back_us\":%.1f,%s,%s,%s}\n",
           mode, size / (double)(1ull << 30), chunk >> 20, n, release_us, create_us, reference, backup, after);
    return 0;
}
