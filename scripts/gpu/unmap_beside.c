/*
 * unmap_beside.c: does an unmap on another thread slow the map + setAccess of this one? (A lead for
 * taking unmaps off the allocating thread; docs/allocator.md, "Why the slow path does not run in the
 * background".) Build: gcc -O2 -o unmap_beside scripts/gpu/unmap_beside.c -ldl -lpthread; run:
 * unmap_beside alone|beside [SIZE_MIB].
 * Moves COUNT handles of SIZE from range A to range B (map at B, setAccess, unmap at A), either all on this thread
 * ("alone") or with the unmaps handed to a second thread ("beside"); prints the main thread's time
 * per move and the unmap thread's time. 100 us of spinning between moves stand for a replay's cache
 * hits between slow paths.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#define PROGRAM "unmap_beside"
#include "cuda_driver_subset.h"

#define COUNT 256
static CUdeviceptr a, b;
static size_t size;
static CUcontext ctx;
static atomic_int queued, done;
static double unmap_us;

static void *unmapper(void *arg) {
    (void)arg;
    check("cuCtxSetCurrent", cuCtxSetCurrent(ctx));
    for (int i = 0; i < COUNT; i++) {
        while (atomic_load(&queued) <= i) ;
        double t = now_us();
        check("cuMemUnmap", cuMemUnmap(a + (size_t)i * size, size));
        unmap_us += now_us() - t;
        atomic_store(&done, i + 1);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int beside = argc > 1 && strcmp(argv[1], "beside") == 0;
    size = (argc > 2 ? strtoull(argv[2], NULL, 0) : 2) << 20;
    open_driver(&ctx);
    CUmemAllocationProp prop = {0};
    prop.type = 1; prop.location.type = 1;
    CUmemAccessDesc rw = {{1, 0}, 3};
    CUmemHandle h[COUNT];
    check("reserve", cuMemAddressReserve(&a, size * COUNT, 0, 0, 0));
    check("reserve", cuMemAddressReserve(&b, size * COUNT, 0, 0, 0));
    for (int i = 0; i < COUNT; i++) {
        check("create", cuMemCreate(&h[i], size, &prop, 0));
        check("map", cuMemMap(a + (size_t)i * size, size, 0, h[i], 0));
        check("access", cuMemSetAccess(a + (size_t)i * size, size, &rw, 1));
    }
    pthread_t t;
    if (beside) pthread_create(&t, NULL, unmapper, NULL);
    double map_us = 0, access_us = 0, own_unmap_us = 0, t0 = now_us();
    for (int i = 0; i < COUNT; i++) {
        double s = now_us();
        check("map", cuMemMap(b + (size_t)i * size, size, 0, h[i], 0));
        double m = now_us();
        check("access", cuMemSetAccess(b + (size_t)i * size, size, &rw, 1));
        double e = now_us();
        map_us += m - s; access_us += e - m;
        if (beside) {
            atomic_store(&queued, i + 1);
            /* the work between moves: a replay does about 100 cache hits (~100 us) between slow paths */
            double until = now_us() + 100; while (now_us() < until) ;
        } else {
            check("unmap", cuMemUnmap(a + (size_t)i * size, size));
            own_unmap_us += now_us() - e;
            double until = now_us() + 100; while (now_us() < until) ;
        }
    }
    double main_us = now_us() - t0;
    if (beside) pthread_join(t, NULL);
    printf("{\"mode\":\"%s\",\"size_mib\":%zu,\"moves\":%d,\"main_us_per_move\":%.1f,\"map_us\":%.1f,\"set_access_us\":%.1f,\"unmap_us\":%.1f}\n",
           beside ? "beside" : "alone", size >> 20, COUNT, (main_us - COUNT * 100.0) / COUNT, map_us / COUNT, access_us / COUNT,
           (beside ? unmap_us : own_unmap_us) / COUNT);
    return 0;
}
