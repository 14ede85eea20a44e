/*
 * first_vmm.c: what the driver's virtual-memory calls cost for a process's first large allocation,
 * against cuMemAlloc, and whether one small create/map/setAccess made earlier (as a start-up
 * warm-up could) makes the first large one cheaper. No vmmkit: the driver API alone, through
 * libcuda.so.1. One process per measurement, after the primary context is made current:
 *   first_vmm native SIZE       cuMemAlloc(SIZE), timed, twice
 *   first_vmm vmm SIZE          cuMemCreate + cuMemAddressReserve + cuMemMap + cuMemSetAccess of SIZE, each timed, twice
 *   first_vmm vmm-warm SIZE     the same after one 2 MiB create/reserve/map/setAccess/unmap/release
 *   first_vmm vmm-aligned SIZE  as vmm, the address reserved at a 1 GiB boundary (the driver can map
 *                               a range with pages larger than 2 MiB only where it is aligned to them)
 *   first_vmm vmm-export SIZE   as vmm, the handles exportable as POSIX descriptors (for CUDA IPC)
 *   first_vmm vmm-rdma SIZE     as vmm, the handles made GPUDirect RDMA capable (as torch_memory_saver
 *                               makes its handles where the device supports it)
 *   first_vmm vmm-big-va SIZE   as vmm, mapped at the start of one 256 GiB reservation made first (as
 *                               vmmkit reserves twice the device's memory per region)
 *   first_vmm vmm-kept SIZE     as vmm-warm, the 2 MiB allocation left mapped (as vmmkit's first small
 *                               request leaves its page)
 *   first_vmm vmm-sync SIZE     as vmm-kept, then cuCtxSynchronize (as a program's cudaDeviceSynchronize,
 *                               or vmmkit's fence after a cudaFree) just before the timed allocations
 *   first_vmm vmm-sync-relaxed SIZE  as vmm-sync, the synchronisation in the relaxed stream-capture
 *                               mode and the mode put back (cuThreadExchangeStreamCaptureMode), as vmmkit's
 *   first_vmm vmm-sync-thread SIZE   as vmm-sync-relaxed, made by another thread (as vmmkit's fence), joined
 *   first_vmm vmm-spin SIZE     as vmm, while 8 other threads of the process spin on the CPU (as a
 *                               JVM's compiler threads may right after start-up): whether the driver's
 *                               calls slow down when the process runs on other cores too
 *   first_vmm vmm-split SIZE    the allocation made of two handles of SIZE/2, created at once by two
 *                               threads, mapped side by side and granted access in one call: whether
 *                               the driver creates in parallel
 *   first_vmm vmm-pt-warm SIZE  as vmm-big-va, after one 2 MiB handle was mapped, granted access and
 *                               unmapped at the very address the timed allocation then takes: whether
 *                               the page tables the driver made for that range outlive the unmap
 *   first_vmm vmm-offset SIZE   as vmm, mapped FIRST_VMM_OFFSET_MIB (2) MiB past a 1 GiB boundary inside
 *                               a larger reservation: an address aligned to a page but to nothing larger,
 *                               where the driver's own reservations come 32 MiB-aligned
 * Each allocation is then unmapped and released, timed too (the second first). FIRST_VMM_IDLE_MS=N
 * makes no driver call for N ms before the timed allocations (FIRST_VMM_IDLE_KIND: how, at idle()
 * below). FIRST_VMM_EXTRA_VA_GIB="286 286" reserves address ranges
 * of those sizes first and leaves them unused (as vmmkit's regions reserve twice the device's memory
 * each): whether address space reserved elsewhere in the process slows the calls.
 * Prints one JSON line per allocation. Built by scripts/gpu/cold-path.sh (step "driver").
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROGRAM "first_vmm"
#include "cuda_driver_subset.h"

static CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*cuMemAddressFree)(CUdeviceptr, size_t);
static CUresult (*cuThreadExchangeStreamCaptureMode)(int *);

static CUcontext context;

/* cuCtxSynchronize in the relaxed capture mode (2), the thread's mode put back after. */
static void *relaxed_sync(void *unused) {
    (void)unused;
    if (!context) return NULL;
    check("cuCtxSetCurrent", cuCtxSetCurrent(context));
    int mode = 2;
    check("cuThreadExchangeStreamCaptureMode", cuThreadExchangeStreamCaptureMode(&mode));
    check("cuCtxSynchronize", cuCtxSynchronize());
    check("cuThreadExchangeStreamCaptureMode", cuThreadExchangeStreamCaptureMode(&mode));
    return NULL;
}

/* vmm-offset: the timed mappings start this far past a 1 GiB boundary. */
static size_t offset_bytes;

/* How the timed allocations' handles are made (vmm-export, vmm-rdma). */
static int exportable;
static int rdma_capable;

/* FIRST_VMM_IDLE_MS: the process makes no driver call for this long before the timed allocations
 * (after its warm-up), to show what an idle spell between a program's start and its first large
 * allocation costs. FIRST_VMM_IDLE_KIND says how it spends the spell, to tell the CPU's idle states
 * from the driver's: sleep (the default), spin (the calling thread busy on the CPU throughout),
 * sleep-info (asleep, then one cuMemGetInfo, a call into the kernel driver, just before) or
 * sleep-create (asleep, then a 2 MiB cuMemCreate and cuMemRelease just before). */
static CUresult (*cuMemGetInfo)(size_t *, size_t *);
static CUmemAllocationProp device_memory(int posix_descriptor);
static void idle(void) {
    const char *ms = getenv("FIRST_VMM_IDLE_MS");
    if (!ms || atoi(ms) <= 0) return;
    const char *kind = getenv("FIRST_VMM_IDLE_KIND");
    if (!kind) kind = "sleep";
    if (strcmp(kind, "spin") == 0) {
        volatile unsigned long n = 0;
        for (double end = now_us() + atoi(ms) * 1000.0; now_us() < end;) n++;
        return;
    }
    struct timespec t = {atoi(ms) / 1000, (atoi(ms) % 1000) * 1000000L};
    nanosleep(&t, NULL);
    if (strcmp(kind, "sleep-info") == 0) {
        size_t free_bytes, total_bytes;
        check("cuMemGetInfo", cuMemGetInfo(&free_bytes, &total_bytes));
    } else if (strcmp(kind, "sleep-create") == 0) {
        CUmemAllocationProp prop = device_memory(0);
        CUmemHandle handle;
        check("cuMemCreate (2 MiB)", cuMemCreate(&handle, 2u << 20, &prop, 0));
        check("cuMemRelease (2 MiB)", cuMemRelease(handle));
    } else if (strcmp(kind, "sleep") != 0) {
        fprintf(stderr, "first_vmm: FIRST_VMM_IDLE_KIND %s is none of sleep, spin, sleep-info, sleep-create\n", kind);
        exit(2);
    }
}
/* FIRST_VMM_EXTRA_VA_GIB: unused reservations of these sizes (GiB, space-separated), made first. */
static void reserve_extra_va(void) {
    const char *list = getenv("FIRST_VMM_EXTRA_VA_GIB");
    if (!list) return;
    char *end;
    for (unsigned long long gib = strtoull(list, &end, 10); end != list; gib = strtoull(list, &end, 10)) {
        CUdeviceptr va;
        check("cuMemAddressReserve (extra)", cuMemAddressReserve(&va, (size_t)gib << 30, 2u << 20, 0, 0));
        list = end;
    }
}
static CUdeviceptr big_base, big_next;   /* vmm-big-va: the reservation, and where the next mapping goes */
static const size_t BIG_VA = (size_t)256 << 30;

typedef struct { CUmemHandle handle; CUdeviceptr va; size_t size; } Allocation;

/* vmm-spin: threads that spin until told to stop. */
static volatile int spinning = 1;
static void *spin(void *unused) {
    (void)unused;
    volatile unsigned long n = 0;
    while (spinning) n++;
    return NULL;
}

/* cuMemCreate's properties: device 0's memory (CU_MEM_ALLOCATION_TYPE_PINNED), exportable as a POSIX descriptor when asked. */
static CUmemAllocationProp device_memory(int posix_descriptor) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = 1;
    prop.requestedHandleTypes = posix_descriptor; /* CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1 */
    prop.location.type = 1;
    prop.location.id = 0;
    prop.allocFlags.gpuDirectRDMACapable = (unsigned char)rdma_capable;
    return prop;
}

/* vmm-split: one half's create, on a thread of its own. */
typedef struct { size_t size; CUmemHandle handle; double us; } HalfCreate;
static void *create_half(void *arg) {
    HalfCreate *h = arg;
    CUmemAllocationProp prop = device_memory(0);
    if (context) check("cuCtxSetCurrent", cuCtxSetCurrent(context));
    double t0 = now_us();
    check("cuMemCreate (half)", cuMemCreate(&h->handle, h->size, &prop, 0));
    h->us = now_us() - t0;
    return NULL;
}

/* vmm-split: two handles of size/2 created by two threads at once, mapped and granted access. */
static void split_allocation(size_t size, const char *label) {
    HalfCreate halves[2] = {{size / 2, 0, 0}, {size / 2, 0, 0}};
    pthread_t threads[2];
    CUdeviceptr va;
    CUmemAccessDesc access = {{1, 0}, 3};
    double t0 = now_us();
    for (int i = 0; i < 2; i++)
        if (pthread_create(&threads[i], NULL, create_half, &halves[i]) != 0) exit(1);
    for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
    double t1 = now_us();
    check("cuMemAddressReserve", cuMemAddressReserve(&va, size, 0, 0, 0));
    check("cuMemMap", cuMemMap(va, size / 2, 0, halves[0].handle, 0));
    check("cuMemMap", cuMemMap(va + size / 2, size / 2, 0, halves[1].handle, 0));
    double t2 = now_us();
    check("cuMemSetAccess", cuMemSetAccess(va, size, &access, 1));
    double t3 = now_us();
    printf("{\"test\":\"%s\",\"size\":%zu,\"create_us\":%.1f,\"create_each_us\":[%.1f,%.1f],\"map_us\":%.1f,\"set_access_us\":%.1f,\"total_us\":%.1f}\n",
           label, size, t1 - t0, halves[0].us, halves[1].us, t2 - t1, t3 - t2, t3 - t0);
}

/* Unmaps and releases a, timing both; prints them under label. */
static void free_allocation(Allocation a, const char *label) {
    double t0 = now_us();
    check("cuMemUnmap", cuMemUnmap(a.va, a.size));
    double t1 = now_us();
    check("cuMemRelease", cuMemRelease(a.handle));
    double t2 = now_us();
    if (!big_base && !offset_bytes) check("cuMemAddressFree", cuMemAddressFree(a.va, a.size));
    printf("{\"test\":\"%s-free\",\"size\":%zu,\"unmap_us\":%.1f,\"release_us\":%.1f}\n", label, a.size, t1 - t0, t2 - t1);
}

/* One VMM allocation of size bytes; prints its steps' times when label is not NULL. */
static Allocation vmm_allocation(size_t size, size_t alignment, const char *label, int unmap_after) {
    CUmemAllocationProp prop = device_memory(exportable);
    CUmemAccessDesc access = {{1, 0}, 3};
    CUmemHandle handle;
    CUdeviceptr va;
    double t0 = now_us();
    check("cuMemCreate", cuMemCreate(&handle, size, &prop, 0));
    double t1 = now_us();
    if (big_base) {
        va = big_next;
        big_next += size;
    } else if (offset_bytes) {
        CUdeviceptr base;
        check("cuMemAddressReserve (offset)", cuMemAddressReserve(&base, size + ((size_t)1 << 30), (size_t)1 << 30, 0, 0));
        va = base + offset_bytes;
    } else {
        check("cuMemAddressReserve", cuMemAddressReserve(&va, size, alignment, 0, 0));
    }
    double t2 = now_us();
    check("cuMemMap", cuMemMap(va, size, 0, handle, 0));
    double t3 = now_us();
    check("cuMemSetAccess", cuMemSetAccess(va, size, &access, 1));
    double t4 = now_us();
    if (label)
        printf("{\"test\":\"%s\",\"size\":%zu,\"va_alignment_mib\":%llu,\"create_us\":%.1f,\"reserve_us\":%.1f,\"map_us\":%.1f,\"set_access_us\":%.1f,\"total_us\":%.1f}\n",
               label, size, (unsigned long long)((va & -va) >> 20), t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0);
    Allocation a = {handle, va, size};
    if (unmap_after) {
        check("cuMemUnmap", cuMemUnmap(va, size));
        check("cuMemRelease", cuMemRelease(handle));
        check("cuMemAddressFree", cuMemAddressFree(va, size));
    }
    return a;
}

int main(int argc, char **argv) {
    static const char *const modes[] = {"native", "vmm", "vmm-warm", "vmm-kept", "vmm-sync", "vmm-sync-relaxed",
                                        "vmm-sync-thread", "vmm-aligned", "vmm-export", "vmm-big-va",
                                        "vmm-spin", "vmm-split", "vmm-pt-warm", "vmm-rdma", "vmm-offset"};
    int known = 0;
    for (size_t i = 0; argc >= 3 && i < sizeof modes / sizeof *modes; i++) known |= strcmp(argv[1], modes[i]) == 0;
    if (!known) { fprintf(stderr, "usage: first_vmm MODE SIZE (MODE: see the comment at the top)\n"); return 2; }
    const char *mode = argv[1];
    size_t size = strtoull(argv[2], NULL, 0);
    CUcontext ctx;
    void *lib = open_driver(&ctx);
    cuMemAlloc = sym(lib, "cuMemAlloc_v2");
    cuMemAddressFree = sym(lib, "cuMemAddressFree");
    cuMemGetInfo = sym(lib, "cuMemGetInfo_v2");
    cuThreadExchangeStreamCaptureMode = sym(lib, "cuThreadExchangeStreamCaptureMode");
    context = ctx;
    CUdeviceptr small;
    check("cuMemAlloc (4 KiB)", cuMemAlloc(&small, 4096)); /* as the runtime's start does */
    /* What comes before the idle spell and the timed allocations. */
    if (strcmp(mode, "vmm-warm") == 0) vmm_allocation(2u << 20, 0, NULL, 1);
    if (strcmp(mode, "vmm-kept") == 0 || strncmp(mode, "vmm-sync", 8) == 0) vmm_allocation(2u << 20, 0, NULL, 0);
    reserve_extra_va();
    idle();
    if (strcmp(mode, "vmm-sync") == 0) check("cuCtxSynchronize", cuCtxSynchronize());
    if (strcmp(mode, "vmm-sync-relaxed") == 0) relaxed_sync(NULL);
    if (strcmp(mode, "vmm-sync-thread") == 0) {
        pthread_t thread;
        if (pthread_create(&thread, NULL, relaxed_sync, NULL) != 0 || pthread_join(thread, NULL) != 0) return 1;
    }

    if (strcmp(mode, "native") == 0) {
        for (int i = 1; i <= 2; i++) {
            CUdeviceptr p;
            double t = now_us();
            check("cuMemAlloc", cuMemAlloc(&p, size));
            printf("{\"test\":\"native-%d\",\"size\":%zu,\"total_us\":%.1f}\n", i, size, now_us() - t);
        }
        return 0;
    }
    /* How the timed allocations are made. */
    size_t alignment = 0;
    if (strcmp(mode, "vmm-aligned") == 0) alignment = (size_t)1 << 30;
    if (strcmp(mode, "vmm-export") == 0) exportable = 1;
    if (strcmp(mode, "vmm-rdma") == 0) rdma_capable = 1;
    if (strcmp(mode, "vmm-offset") == 0) {
        const char *mib = getenv("FIRST_VMM_OFFSET_MIB");
        offset_bytes = (size_t)(mib ? atoi(mib) : 2) << 20;
    }
    if (strcmp(mode, "vmm-big-va") == 0 || strcmp(mode, "vmm-pt-warm") == 0) {
        check("cuMemAddressReserve (256 GiB)", cuMemAddressReserve(&big_base, BIG_VA, 2u << 20, 0, 0));
        big_next = big_base;
    }
    if (strcmp(mode, "vmm-pt-warm") == 0) { /* 2 MiB mapped at the range's start, then unmapped */
        Allocation page = vmm_allocation(2u << 20, 0, NULL, 0);
        check("cuMemUnmap", cuMemUnmap(page.va, page.size));
        check("cuMemRelease", cuMemRelease(page.handle));
        big_next = big_base;
    }
    if (strcmp(mode, "vmm-split") == 0) {
        split_allocation(size, "vmm-split-1");
        split_allocation(size, "vmm-split-2");
        return 0;
    }
    pthread_t spinners[8];
    int spin_mode = strcmp(mode, "vmm-spin") == 0;
    if (spin_mode) {
        for (int i = 0; i < 8; i++)
            if (pthread_create(&spinners[i], NULL, spin, NULL) != 0) return 1;
        struct timespec settle = {0, 200000L}; /* let them reach their cores */
        nanosleep(&settle, NULL);
    }
    char first[32], second[32];
    snprintf(first, sizeof first, "%s-1", mode);
    snprintf(second, sizeof second, "%s-2", mode);
    Allocation a = vmm_allocation(size, alignment, first, 0);
    Allocation b = vmm_allocation(size, alignment, second, 0);
    if (spin_mode) {
        spinning = 0;
        for (int i = 0; i < 8; i++) pthread_join(spinners[i], NULL);
    }
    free_allocation(b, second);
    free_allocation(a, first);
    return 0;
}
