/*
 * page_mappings.c: what the driver charges when a large handle is mapped as one mapping per page
 * (cuMemMap takes an offset into a handle), the lead for moving a wholly free page of a partly live
 * handle without making more handles (docs/allocator.md, "The family, and what passes 1.05").
 * The driver API from C, no vmmkit. Build: gcc -O2 -o page_mappings scripts/gpu/page_mappings.c -ldl
 *   page_mappings HANDLE_MIB [COUNT]
 * makes COUNT (64) handles of HANDLE_MIB (8) and, for each way, maps all, grants access, unmaps all,
 * timing each call (us per handle, mean):
 *   whole      one mapping per handle, one setAccess and one unmap per handle
 *   pages      one mapping per 2 MiB page, one setAccess over the handle, one unmap over the handle
 *   pages-each one mapping per page, setAccess and unmap per page
 * then, with the handles mapped per page, moves each handle's last page to another range (unmap that
 * page, map it there with its offset, setAccess), against moving a one-page handle mapped whole:
 *   move-page / move-handle (us per move)
 * Prints one JSON line.
 */
#include <string.h>

#define PROGRAM "page_mappings"
#include "cuda_driver_subset.h"

#define PAGE (2ull << 20)
#define MOST 256

static CUmemAllocationProp prop;
static CUmemAccessDesc rw = {{1, 0}, 3};

int main(int argc, char **argv) {
    size_t size = (argc > 1 ? strtoull(argv[1], NULL, 0) : 8) << 20;
    int count = argc > 2 ? atoi(argv[2]) : 64;
    if (size < PAGE || size % PAGE != 0 || count < 1 || count > MOST) {
        fprintf(stderr, "usage: page_mappings HANDLE_MIB (a multiple of 2) [COUNT <= %d]\n", MOST);
        return 2;
    }
    CUcontext ctx;
    open_driver(&ctx);
    prop.type = 1;
    prop.location.type = 1;
    CUmemHandle h[MOST], small[MOST];
    CUdeviceptr a, b;
    check("cuMemAddressReserve", cuMemAddressReserve(&a, size * count, 0, 0, 0));
    check("cuMemAddressReserve", cuMemAddressReserve(&b, size * count, 0, 0, 0));
    for (int i = 0; i < count; i++) {
        check("cuMemCreate", cuMemCreate(&h[i], size, &prop, 0));
        check("cuMemCreate", cuMemCreate(&small[i], PAGE, &prop, 0));
    }
    size_t pages = size / PAGE;
    const char *ways[] = {"whole", "pages", "pages-each"};
    printf("{\"handle_mib\":%zu,\"handles\":%d", size >> 20, count);
    for (int w = 0; w < 3; w++) {
        double map = 0, access = 0, unmap = 0, t;
        for (int i = 0; i < count; i++) {
            CUdeviceptr va = a + i * size;
            t = now_us();
            if (w == 0) check("cuMemMap", cuMemMap(va, size, 0, h[i], 0));
            else for (size_t p = 0; p < pages; p++) check("cuMemMap", cuMemMap(va + p * PAGE, PAGE, p * PAGE, h[i], 0));
            map += now_us() - t;
            t = now_us();
            if (w < 2) check("cuMemSetAccess", cuMemSetAccess(va, size, &rw, 1));
            else for (size_t p = 0; p < pages; p++) check("cuMemSetAccess", cuMemSetAccess(va + p * PAGE, PAGE, &rw, 1));
            access += now_us() - t;
        }
        for (int i = 0; i < count; i++) {
            CUdeviceptr va = a + i * size;
            t = now_us();
            if (w < 2) check("cuMemUnmap", cuMemUnmap(va, size));
            else for (size_t p = 0; p < pages; p++) check("cuMemUnmap", cuMemUnmap(va + p * PAGE, PAGE));
            unmap += now_us() - t;
        }
        printf(",\"%s\":{\"map_us\":%.1f,\"set_access_us\":%.1f,\"unmap_us\":%.1f}", ways[w], map / count, access / count, unmap / count);
    }
    /* Moves: each handle mapped per page at a; its last page goes to b. */
    for (int i = 0; i < count; i++) {
        for (size_t p = 0; p < pages; p++) check("cuMemMap", cuMemMap(a + i * size + p * PAGE, PAGE, p * PAGE, h[i], 0));
        check("cuMemSetAccess", cuMemSetAccess(a + i * size, size, &rw, 1));
    }
    double t0 = now_us();
    for (int i = 0; i < count; i++) {
        size_t last = (pages - 1) * PAGE;
        check("cuMemUnmap", cuMemUnmap(a + i * size + last, PAGE));
        check("cuMemMap", cuMemMap(b + i * size, PAGE, last, h[i], 0));
        check("cuMemSetAccess", cuMemSetAccess(b + i * size, PAGE, &rw, 1));
    }
    double move_page = (now_us() - t0) / count;
    for (int i = 0; i < count; i++) {
        check("cuMemUnmap", cuMemUnmap(b + i * size, PAGE));
        for (size_t p = 0; p + 1 < pages; p++) check("cuMemUnmap", cuMemUnmap(a + i * size + p * PAGE, PAGE));
        check("cuMemMap", cuMemMap(a + i * size, PAGE, 0, small[i], 0));
        check("cuMemSetAccess", cuMemSetAccess(a + i * size, PAGE, &rw, 1));
    }
    t0 = now_us();
    for (int i = 0; i < count; i++) {
        check("cuMemUnmap", cuMemUnmap(a + i * size, PAGE));
        check("cuMemMap", cuMemMap(b + i * size, PAGE, 0, small[i], 0));
        check("cuMemSetAccess", cuMemSetAccess(b + i * size, PAGE, &rw, 1));
    }
    double move_handle = (now_us() - t0) / count;
    printf(",\"move_page_us\":%.1f,\"move_handle_us\":%.1f}\n", move_page, move_handle);
    for (int i = 0; i < count; i++) {
        check("cuMemUnmap", cuMemUnmap(b + i * size, PAGE));
        check("cuMemRelease", cuMemRelease(h[i]));
        check("cuMemRelease", cuMemRelease(small[i]));
    }
    return 0;
}
