/*
 * page_mappings.c: whether the pages of one large handle can be mapped and moved one by one, the
 * lead for moving a wholly free page of a partly live handle without making more handles
 * (docs/generation-traces.md, "The family, and what passes 1.05"). The driver API from C, no vmmkit.
 * Build: gcc -O2 -o page_mappings scripts/gpu/page_mappings.c -ldl
 *   page_mappings HANDLE_MIB [COUNT]
 * makes COUNT (64) handles of HANDLE_MIB (8, a multiple of 2) and first asks the driver, with one
 * handle, the three questions the lead rests on (each answer a CUresult, 0 = allowed):
 *   offset_map      cuMemMap of the handle's second page alone (a nonzero offset into the handle)
 *   partial_unmap   cuMemUnmap of the last page of the handle mapped whole
 *   partial_access  cuMemSetAccess over the last page alone of the handle mapped whole
 * then times, per handle (us, mean): map whole, setAccess, unmap ("whole"); and where offset_map is
 * allowed, one mapping per page with one setAccess and unmap over the handle ("pages"), and moving
 * each handle's last page elsewhere against moving a one-page handle ("move_page_us",
 * "move_handle_us"). Prints one JSON line.
 */
#include <string.h>

#define PROGRAM "page_mappings"
#include "cuda_driver_subset.h"

#define PAGE (2ull << 20)
#define MOST 256

static CUmemAllocationProp prop;
static CUmemAccessDesc rw = {{1, 0}, 3};

/* The three questions, asked with handle h at va (a range of size bytes, unmapped on return);
 * true when the driver maps at an offset into a handle. */
static int ask(CUmemHandle h, CUdeviceptr va, size_t size) {
    int offset_map = cuMemMap(va + PAGE, PAGE, PAGE, h, 0);
    if (offset_map == 0) check("cuMemUnmap", cuMemUnmap(va + PAGE, PAGE));
    check("cuMemMap", cuMemMap(va, size, 0, h, 0));
    int partial_access = cuMemSetAccess(va + size - PAGE, PAGE, &rw, 1);
    int partial_unmap = cuMemUnmap(va + size - PAGE, PAGE);
    if (partial_unmap == 0) check("cuMemUnmap", cuMemUnmap(va, size - PAGE));
    else check("cuMemUnmap", cuMemUnmap(va, size));
    printf(",\"offset_map\":%d,\"partial_unmap\":%d,\"partial_access\":%d", offset_map, partial_unmap, partial_access);
    return offset_map == 0;
}

int main(int argc, char **argv) {
    size_t size = (argc > 1 ? strtoull(argv[1], NULL, 0) : 8) << 20;
    int count = argc > 2 ? atoi(argv[2]) : 64;
    if (size < 2 * PAGE || size % PAGE != 0 || count < 1 || count > MOST) {
        fprintf(stderr, "usage: page_mappings HANDLE_MIB (a multiple of 2, at least 4) [COUNT <= %d]\n", MOST);
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
    printf("{\"handle_mib\":%zu,\"handles\":%d", size >> 20, count);
    int offsets = ask(h[0], b, size);

    size_t pages = size / PAGE;
    for (int w = 0; w < (offsets ? 2 : 1); w++) {
        double map = 0, access = 0, unmap = 0, t;
        for (int i = 0; i < count; i++) {
            CUdeviceptr va = a + i * size;
            t = now_us();
            if (w == 0) check("cuMemMap", cuMemMap(va, size, 0, h[i], 0));
            else for (size_t p = 0; p < pages; p++) check("cuMemMap", cuMemMap(va + p * PAGE, PAGE, p * PAGE, h[i], 0));
            map += now_us() - t;
            t = now_us();
            check("cuMemSetAccess", cuMemSetAccess(va, size, &rw, 1));
            access += now_us() - t;
        }
        for (int i = 0; i < count; i++) {
            t = now_us();
            check("cuMemUnmap", cuMemUnmap(a + i * size, size));
            unmap += now_us() - t;
        }
        printf(",\"%s\":{\"map_us\":%.1f,\"set_access_us\":%.1f,\"unmap_us\":%.1f}", w == 0 ? "whole" : "pages",
               map / count, access / count, unmap / count);
    }
    if (offsets) { /* each handle mapped per page at a; its last page moves to b, then a one-page handle does */
        for (int i = 0; i < count; i++) {
            for (size_t p = 0; p < pages; p++) check("cuMemMap", cuMemMap(a + i * size + p * PAGE, PAGE, p * PAGE, h[i], 0));
            check("cuMemSetAccess", cuMemSetAccess(a + i * size, size, &rw, 1));
        }
        size_t last = (pages - 1) * PAGE;
        double t0 = now_us();
        for (int i = 0; i < count; i++) {
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
        printf(",\"move_page_us\":%.1f,\"move_handle_us\":%.1f", move_page, (now_us() - t0) / count);
        for (int i = 0; i < count; i++) check("cuMemUnmap", cuMemUnmap(b + i * size, PAGE));
    }
    printf("}\n");
    for (int i = 0; i < count; i++) {
        check("cuMemRelease", cuMemRelease(h[i]));
        check("cuMemRelease", cuMemRelease(small[i]));
    }
    return 0;
}
