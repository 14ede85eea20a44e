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
 *   resume-wait the same with RESUME_WAIT_MS (100) between the new handle's access and the copy
 *   backup-after copies B -> host at once (does a release slow copies to the host?)
 *   resume-pipelined as resume, but A is HANDLES handles (8) and each is unmapped and released as
 *               soon as the backup's pieces inside it have landed, while the later pieces copy
 * HOST_MEM=register pins with mmap, MADV_HUGEPAGE and cuMemHostRegister (as vmmkit does by
 * default) instead of cuMemHostAlloc.
 * Each copy is SIZE in CHUNK_MIB pieces (256) alternating over STREAMS streams (2), as vmmkit's
 * copies are; an event after each piece gives the time of each piece (one stream: a time line).
 * SM_SHARE=P (percent, 0 by default) copies the last P % of each host-to-device copy with a kernel
 * that reads the pinned host memory itself (the SMs, not a copy engine), on a stream of its own,
 * launched before the pieces; SM_BLOCKS=N blocks of 512 threads per multiprocessor (4).
 * Prints one JSON line: GiB/s of each copy (wall, queue to the last stream's end) and of its pieces
 * (first, slowest, median, fastest), and of the kernel's share ("sm_gibps"). Built and run by scripts/gpu/pause-resume.sh (extra
 * "copy-after-release").
 */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

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
static CUresult (*cuModuleLoadData)(void **, const void *);
static CUresult (*cuModuleGetFunction)(void **, void *, const char *);
static CUresult (*cuLaunchKernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **, void **);
static CUresult (*cuDeviceGetAttribute)(int *, int, int);
static CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);

/* dst[i] = src[i] in 16-byte units, four loads in flight per thread, grid-stride. */
static const char COPY_PTX[] =
    ".version 7.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry h2d_copy(.param .u64 p_dst, .param .u64 p_src, .param .u64 p_n)\n{\n"
    ".reg .pred %p<5>;\n.reg .b32 %r<21>;\n.reg .b64 %rd<22>;\n"
    "mov.u32 %r1, %ctaid.x;\nmov.u32 %r2, %ntid.x;\nmov.u32 %r3, %tid.x;\nmov.u32 %r4, %nctaid.x;\n"
    "cvt.u64.u32 %rd1, %r3;\nmad.wide.u32 %rd2, %r1, %r2, %rd1;\nmul.wide.u32 %rd3, %r4, %r2;\n"
    "ld.param.u64 %rd4, [p_dst];\nld.param.u64 %rd5, [p_src];\nld.param.u64 %rd6, [p_n];\n"
    "cvta.to.global.u64 %rd4, %rd4;\ncvta.to.global.u64 %rd5, %rd5;\nshl.b64 %rd7, %rd3, 4;\nshl.b64 %rd20, %rd3, 2;\n"
    "LOOP:\nsetp.ge.u64 %p1, %rd2, %rd6;\n@%p1 bra DONE;\n"
    "add.s64 %rd8, %rd2, %rd3;\nadd.s64 %rd9, %rd8, %rd3;\nadd.s64 %rd10, %rd9, %rd3;\n"
    "setp.lt.u64 %p2, %rd8, %rd6;\nsetp.lt.u64 %p3, %rd9, %rd6;\nsetp.lt.u64 %p4, %rd10, %rd6;\n"
    "shl.b64 %rd11, %rd2, 4;\nadd.s64 %rd12, %rd5, %rd11;\nadd.s64 %rd13, %rd4, %rd11;\n"
    "add.s64 %rd14, %rd12, %rd7;\nadd.s64 %rd15, %rd14, %rd7;\nadd.s64 %rd16, %rd15, %rd7;\n"
    "ld.global.v4.u32 {%r5,%r6,%r7,%r8}, [%rd12];\n"
    "@%p2 ld.global.v4.u32 {%r9,%r10,%r11,%r12}, [%rd14];\n"
    "@%p3 ld.global.v4.u32 {%r13,%r14,%r15,%r16}, [%rd15];\n"
    "@%p4 ld.global.v4.u32 {%r17,%r18,%r19,%r20}, [%rd16];\n"
    "add.s64 %rd17, %rd13, %rd7;\nadd.s64 %rd18, %rd17, %rd7;\nadd.s64 %rd19, %rd18, %rd7;\n"
    "st.global.v4.u32 [%rd13], {%r5,%r6,%r7,%r8};\n"
    "@%p2 st.global.v4.u32 [%rd17], {%r9,%r10,%r11,%r12};\n"
    "@%p3 st.global.v4.u32 [%rd18], {%r13,%r14,%r15,%r16};\n"
    "@%p4 st.global.v4.u32 [%rd19], {%r17,%r18,%r19,%r20};\n"
    "add.s64 %rd2, %rd2, %rd20;\nbra LOOP;\nDONE:\nret;\n}\n";
static CUresult (*cuEventSynchronize)(CUevent);
static void *copy_kernel;
static int sm_share, sm_grid;
static CUstream sm_stream;
static CUevent sm_start, sm_end;

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
    size_t sm_bytes = to_device ? size / 100 * sm_share / (2u << 20) * (2u << 20) : 0;
    size_t whole = size;
    size -= sm_bytes;
    int pieces = (int)((size + chunk - 1) / chunk);
    for (int s = 0; s < n; s++) check("cuEventRecord", cuEventRecord(starts[s], streams[s]));
    double t0 = now_us();
    if (sm_bytes) {
        CUdeviceptr dst = va + size;
        char *src = host + size;
        unsigned long long units = sm_bytes / 16;
        void *args[] = {&dst, &src, &units};
        check("cuEventRecord", cuEventRecord(sm_start, sm_stream));
        check("cuLaunchKernel", cuLaunchKernel(copy_kernel, sm_grid, 1, 1, 512, 1, 1, 0, sm_stream, args, NULL));
        check("cuEventRecord", cuEventRecord(sm_end, sm_stream));
    }
    for (int i = 0; i < pieces; i++) {
        size_t at = (size_t)i * chunk, bytes = size - at < chunk ? size - at : chunk;
        CUstream stream = streams[i % n];
        if (to_device) check("cuMemcpyHtoDAsync", cuMemcpyHtoDAsync(va + at, host + at, bytes, stream));
        else check("cuMemcpyDtoHAsync", cuMemcpyDtoHAsync(host + at, va + at, bytes, stream));
        check("cuEventRecord", cuEventRecord(ends[i], stream));
    }
    for (int s = 0; s < n; s++) check("cuStreamSynchronize", cuStreamSynchronize(streams[s]));
    if (sm_bytes) check("cuStreamSynchronize", cuStreamSynchronize(sm_stream));
    double wall_s = (now_us() - t0) / 1e6;
    double sm_gibps = 0;
    if (sm_bytes) {
        float ms;
        check("cuEventElapsedTime", cuEventElapsedTime(&ms, sm_start, sm_end));
        sm_gibps = sm_bytes / (double)(1ull << 30) / (ms / 1e3);
        /* The bytes the kernel wrote must be the host's. */
        static char probe[4096];
        for (size_t at = size; at < whole; at += sm_bytes / 4) {
            check("cuMemcpyDtoH", cuMemcpyDtoH(probe, va + at, sizeof probe));
            if (memcmp(probe, host + at, sizeof probe) != 0) { fprintf(stderr, PROGRAM ": the kernel's copy differs at %zu\n", at); exit(1); }
        }
    }
    double gibps[MAX_PIECES];
    for (int i = 0; i < pieces; i++) {
        float ms;
        check("cuEventElapsedTime", cuEventElapsedTime(&ms, i < n ? starts[i] : ends[i - n], ends[i]));
        size_t bytes = size - (size_t)i * chunk < chunk ? size - (size_t)i * chunk : chunk;
        gibps[i] = bytes / (double)(1ull << 30) / (ms / 1e3);
    }
    double first = gibps[0];
    qsort(gibps, pieces, sizeof *gibps, compare_doubles);
    snprintf(out, out_size, "\"%s\":{\"gibps\":%.1f,\"piece_first\":%.1f,\"piece_min\":%.1f,\"piece_median\":%.1f,\"piece_max\":%.1f,\"sm_share\":%d,\"sm_gibps\":%.1f}",
             name, whole / (double)(1ull << 30) / wall_s, first, gibps[0], gibps[pieces / 2], gibps[pieces - 1], sm_bytes ? sm_share : 0, sm_gibps);
}

/* Creates a handle of size bytes, maps it at va with access; returns the handle. */
static CUmemHandle back(CUdeviceptr va, size_t size) {
    CUmemHandle handle;
    check("cuMemCreate", cuMemCreate(&handle, size, &prop, 0));
    check("cuMemMap", cuMemMap(va, size, 0, handle, 0));
    check("cuMemSetAccess", cuMemSetAccess(va, size, &read_write, 1));
    return handle;
}

/* The backup of resume-pipelined: A (handles[0..count), each size / count, mapped from a) copied
 * to host in pieces over n streams, each handle unmapped and released once its pieces landed.
 * Writes the JSON of its GiB/s (queue to the last release) and returns the releases' time in us. */
static double pipelined_backup(char *out, size_t out_size, CUdeviceptr a, char *host, size_t size, size_t chunk, int n,
                               CUmemHandle *handles, int count) {
    int pieces = (int)((size + chunk - 1) / chunk);
    size_t per_handle = size / count;
    double t0 = now_us(), releasing = 0;
    for (int i = 0; i < pieces; i++) {
        size_t at = (size_t)i * chunk, bytes = size - at < chunk ? size - at : chunk;
        check("cuMemcpyDtoHAsync", cuMemcpyDtoHAsync(host + at, a + at, bytes, streams[i % n]));
        check("cuEventRecord", cuEventRecord(ends[i], streams[i % n]));
    }
    int next = 0;
    for (int h = 0; h < count; h++) {
        size_t end = (size_t)(h + 1) * per_handle;
        for (; next < pieces && (size_t)next * chunk < end; next++) check("cuEventSynchronize", cuEventSynchronize(ends[next]));
        double t = now_us();
        check("cuMemUnmap", cuMemUnmap(a + (size_t)h * per_handle, per_handle));
        check("cuMemRelease", cuMemRelease(handles[h]));
        releasing += now_us() - t;
    }
    snprintf(out, out_size, "\"backup\":{\"gibps\":%.1f,\"handles\":%d}", size / (double)(1ull << 30) / ((now_us() - t0) / 1e6), count);
    return releasing;
}

static void sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

int main(int argc, char **argv) {
    static const char *const modes[] = {"reference", "other", "resume", "resume-gap", "resume-sync", "resume-wait", "backup-after",
                                        "resume-pipelined"};
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
    cuEventSynchronize = sym(lib, "cuEventSynchronize");
    cuModuleLoadData = sym(lib, "cuModuleLoadData");
    cuModuleGetFunction = sym(lib, "cuModuleGetFunction");
    cuLaunchKernel = sym(lib, "cuLaunchKernel");
    cuDeviceGetAttribute = sym(lib, "cuDeviceGetAttribute");
    cuMemcpyDtoH = sym(lib, "cuMemcpyDtoH_v2");
    sm_share = getenv("SM_SHARE") ? atoi(getenv("SM_SHARE")) : 0;
    if (sm_share < 0 || sm_share > 100) { fprintf(stderr, PROGRAM ": SM_SHARE is a percentage, 0-100\n"); return 2; }
    if (sm_share) {
        void *module;
        int sms;
        check("cuModuleLoadData", cuModuleLoadData(&module, COPY_PTX));
        check("cuModuleGetFunction", cuModuleGetFunction(&copy_kernel, module, "h2d_copy"));
        check("cuDeviceGetAttribute", cuDeviceGetAttribute(&sms, 16 /* MULTIPROCESSOR_COUNT */, 0));
        sm_grid = sms * (getenv("SM_BLOCKS") ? atoi(getenv("SM_BLOCKS")) : 4);
        check("cuStreamCreate", cuStreamCreate(&sm_stream, 1));
        check("cuEventCreate", cuEventCreate(&sm_start, 0));
        check("cuEventCreate", cuEventCreate(&sm_end, 0));
    }
    memset(&prop, 0, sizeof prop);
    prop.type = 1;
    prop.location.type = 1;
    for (int s = 0; s < n; s++) {
        check("cuStreamCreate", cuStreamCreate(&streams[s], 1 /* non-blocking */));
        check("cuEventCreate", cuEventCreate(&starts[s], 0));
    }
    for (int i = 0; i < MAX_PIECES; i++) check("cuEventCreate", cuEventCreate(&ends[i], 0));

    char *host;
    if (getenv("HOST_MEM") && strcmp(getenv("HOST_MEM"), "register") == 0) {
        CUresult (*cuMemHostRegister)(void *, size_t, unsigned) = sym(lib, "cuMemHostRegister_v2");
        host = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (host == MAP_FAILED) { perror("mmap"); return 1; }
        madvise(host, size, MADV_HUGEPAGE);
        memset(host, 0x3c, size);
        check("cuMemHostRegister", cuMemHostRegister(host, size, 0x3 /* PORTABLE | DEVICEMAP */));
    } else {
        check("cuMemHostAlloc", cuMemHostAlloc((void **)&host, size, 0x3 /* PORTABLE | DEVICEMAP */));
    }
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
    if (strcmp(mode, "resume-pipelined") == 0) {
        int count = getenv("HANDLES") ? atoi(getenv("HANDLES")) : 8;
        if (count < 1 || count > 64 || size % ((size_t)count << 21) != 0) { fprintf(stderr, PROGRAM ": HANDLES 1-64, dividing SIZE in 2 MiB pages\n"); return 2; }
        CUmemHandle handles[64];
        size_t per_handle = size / count;
        for (int h = 0; h < count; h++) {
            check("cuMemCreate", cuMemCreate(&handles[h], per_handle, &prop, 0));
            check("cuMemMap", cuMemMap(a + (size_t)h * per_handle, per_handle, 0, handles[h], 0));
        }
        check("cuMemSetAccess", cuMemSetAccess(a, size, &read_write, 1));
        check("cuMemsetD8", cuMemsetD8(a, 0x5a, size));
        check("cuCtxSynchronize", cuCtxSynchronize());
        release_us = pipelined_backup(backup, sizeof backup, a, host, size, chunk, n, handles, count);
    } else if (strcmp(mode, "reference") != 0) {
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
        if (strcmp(mode, "resume-wait") == 0) sleep_ms(getenv("RESUME_WAIT_MS") ? atoi(getenv("RESUME_WAIT_MS")) : 100);
    }
    copy(after, sizeof after, "after", strcmp(mode, "backup-after") != 0, target, host, size, chunk, n);
    printf("{\"test\":\"copy-after-release\",\"mode\":\"%s\",\"size_gib\":%.2f,\"chunk_mib\":%zu,\"streams\":%d,"
           "\"release_us\":%.1f,\"back_us\":%.1f,%s,%s,%s}\n",
           mode, size / (double)(1ull << 30), chunk >> 20, n, release_us, create_us, reference, backup, after);
    return 0;
}
