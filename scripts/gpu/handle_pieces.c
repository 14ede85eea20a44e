/*
 * handle_pieces.c: what backing one range with pieces of a given size costs against one handle, for
 * a pause's release and a resume's create, map and setAccess (docs/pause-resume.md). The range's
 * memory is written before each pause, as a program's would be (not with HANDLE_PIECES_NO_TOUCH set).
 * Build: gcc -O2 -o handle_pieces scripts/gpu/handle_pieces.c -ldl -lpthread
 * Run: handle_pieces TOTAL_GIB PIECE_MIB [RELEASE_THREADS] [CYCLES]; PIECE_MIB 0 is one handle.
 * Prints one line per step: "pieces total_gib=T piece_mib=P threads=N cycle=C step=S us=U", and
 * the driver's free memory after each pause and resume.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>
#define PROGRAM "handle_pieces"
#include "cuda_driver_subset.h"

static CUresult (*cuMemGetInfo)(size_t *, size_t *);
static CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);

static CUcontext context;
static CUmemHandle *handles;
static size_t piece_count, piece_bytes, total_bytes;
static int threads;
static CUdeviceptr base;
static const char *label;

static void report(int cycle, const char *step, double us) {
    printf("pieces %s threads=%d cycle=%d step=%s us=%.1f\n", label, threads, cycle, step, us);
}

static double free_gib(void) {
    size_t free_bytes, total;
    check("cuMemGetInfo", cuMemGetInfo(&free_bytes, &total));
    return free_bytes / (double)(1ull << 30);
}

typedef struct { size_t first, step; } Share;

static void *release_share(void *arg) {
    Share *s = arg;
    check("cuCtxSetCurrent", cuCtxSetCurrent(context));
    for (size_t i = s->first; i < piece_count; i += s->step) check("cuMemRelease", cuMemRelease(handles[i]));
    return NULL;
}

/* Creates, maps and grants the pieces; returns nothing, prints each step's time. */
static void back(int cycle) {
    CUmemAccessDesc rw = {{1, 0}, 3};
    double t = now_us();
    for (size_t i = 0; i < piece_count; i++) check("cuMemCreate", cuMemCreate(&handles[i], piece_bytes, device_memory_prop(), 0));
    double created = now_us();
    for (size_t i = 0; i < piece_count; i++) check("cuMemMap", cuMemMap(base + i * piece_bytes, piece_bytes, 0, handles[i], 0));
    double mapped = now_us();
    check("cuMemSetAccess", cuMemSetAccess(base, total_bytes, &rw, 1));
    double granted = now_us();
    report(cycle, "create", created - t);
    report(cycle, "map", mapped - created);
    report(cycle, "set_access", granted - mapped);
    report(cycle, "back", granted - t);
}

static void release(int cycle) {
    double t = now_us();
    check("cuMemUnmap", cuMemUnmap(base, total_bytes));
    double unmapped = now_us();
    pthread_t tid[64];
    Share shares[64];
    for (int k = 0; k < threads; k++) {
        shares[k] = (Share){(size_t)k, (size_t)threads};
        if (k > 0) pthread_create(&tid[k], NULL, release_share, &shares[k]);
    }
    release_share(&shares[0]);
    for (int k = 1; k < threads; k++) pthread_join(tid[k], NULL);
    double released = now_us();
    report(cycle, "unmap", unmapped - t);
    report(cycle, "release", released - unmapped);
    report(cycle, "pause", released - t);
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: handle_pieces TOTAL_GIB PIECE_MIB [THREADS] [CYCLES]\n"); return 2; }
    total_bytes = strtoull(argv[1], NULL, 0) << 30;
    size_t piece_mib = strtoull(argv[2], NULL, 0);
    piece_bytes = piece_mib == 0 ? total_bytes : piece_mib << 20;
    threads = argc > 3 ? atoi(argv[3]) : 1;
    int cycles = argc > 4 ? atoi(argv[4]) : 2;
    int touch = getenv("HANDLE_PIECES_NO_TOUCH") == NULL;
    if (threads < 1 || threads > 64 || piece_bytes == 0 || total_bytes % piece_bytes != 0) {
        fprintf(stderr, "handle_pieces: the pieces must divide the total, and 1-64 threads\n");
        return 2;
    }
    piece_count = total_bytes / piece_bytes;
    char text[96];
    snprintf(text, sizeof text, "total_gib=%s piece_mib=%zu", argv[1], piece_bytes >> 20);
    label = text;
    void *lib = open_driver(&context);
    cuMemGetInfo = sym(lib, "cuMemGetInfo_v2");
    cuMemsetD8 = sym(lib, "cuMemsetD8_v2");
    handles = calloc(piece_count, sizeof *handles);
    check("cuMemAddressReserve", cuMemAddressReserve(&base, total_bytes, 0, 0, 0));
    double before = free_gib();
    back(0);
    for (int cycle = 1; cycle <= cycles; cycle++) {
        if (touch) check("cuMemsetD8", cuMemsetD8(base, (unsigned char)cycle, total_bytes));
        check("cuCtxSynchronize", cuCtxSynchronize());
        double held = free_gib();
        release(cycle);
        double paused = free_gib();
        printf("pieces %s threads=%d cycle=%d free_gib before=%.2f held=%.2f paused=%.2f\n",
               label, threads, cycle, before, held, paused);
        back(cycle);
    }
    return 0;
}
