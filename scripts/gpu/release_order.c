/*
 * release_order.c: does the order in which two tags' memory is released decide how long creating it
 * again takes? vLLM's level-2 sleep releases its weights and then its KV cache (the order they were
 * allocated); vmmkit's pause of every tag releases the cache first. Both wake the weights and then
 * the cache, and back to back the cache's create waited 121-135 ms for vLLM, 185-231 ms for vmmkit
 * (docs/memory-tags.md, "Beside vLLM's own sleep mode"). No vmmkit: the driver API alone.
 *   release_order A_GIB B_GIB RELEASE CREATE [GAP_MS [B_PARTS]]
 * makes handle A and handle B (plain, as a tag's), maps them, grants access, writes every byte and
 * synchronises; unmaps both and releases them in the order RELEASE ("ab" or "ba", each release
 * timed); waits GAP_MS (0); then creates them again in the order CREATE (each create timed; B as
 * B_PARTS handles of equal size, 1 by default, timed together, the slowest part printed too), maps
 * them and grants access (timed together). The driver's free memory is printed after each step.
 * Prints one JSON line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROGRAM "release_order"
#include "cuda_driver_subset.h"

static CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
static CUresult (*cuMemGetInfo)(size_t *, size_t *);

static double free_gib(void) {
    size_t free_bytes, total;
    check("cuMemGetInfo", cuMemGetInfo(&free_bytes, &total));
    return free_bytes / (double)(1ull << 30);
}

int main(int argc, char **argv) {
    if (argc < 5 || (strcmp(argv[3], "ab") && strcmp(argv[3], "ba")) || (strcmp(argv[4], "ab") && strcmp(argv[4], "ba"))) {
        fprintf(stderr, "usage: release_order A_GIB B_GIB ab|ba ab|ba [GAP_MS]\n");
        return 2;
    }
    size_t size[2] = {strtoull(argv[1], NULL, 10) << 30, strtoull(argv[2], NULL, 10) << 30};
    int gap_ms = argc > 5 ? atoi(argv[5]) : 0;
    int b_parts = argc > 6 ? atoi(argv[6]) : 1;
    if (b_parts < 1 || b_parts > 256 || size[1] % ((size_t)b_parts << 21) != 0) {
        fprintf(stderr, "release_order: B_PARTS must divide B into whole 2 MiB pages (1-256)\n");
        return 2;
    }
    CUmemHandle parts[256];
    double slowest_part_us = 0;
    CUcontext ctx;
    void *lib = open_driver(&ctx);
    cuMemsetD8 = sym(lib, "cuMemsetD8_v2");
    cuMemGetInfo = sym(lib, "cuMemGetInfo_v2");
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = 1;
    prop.location.type = 1;
    CUmemAccessDesc access = {{1, 0}, 3};
    CUdeviceptr va[2];
    CUmemHandle handle[2];
    for (int i = 0; i < 2; i++) {
        check("cuMemAddressReserve", cuMemAddressReserve(&va[i], size[i], 0, 0, 0));
        check("cuMemCreate", cuMemCreate(&handle[i], size[i], &prop, 0));
        check("cuMemMap", cuMemMap(va[i], size[i], 0, handle[i], 0));
        check("cuMemSetAccess", cuMemSetAccess(va[i], size[i], &access, 1));
        check("cuMemsetD8", cuMemsetD8(va[i], 0x5a, size[i]));
    }
    check("cuCtxSynchronize", cuCtxSynchronize());
    double free_used = free_gib();
    double release_us[2], create_us[2];
    for (int k = 0; k < 2; k++) {
        int i = argv[3][k] - 'a';
        check("cuMemUnmap", cuMemUnmap(va[i], size[i]));
        double t = now_us();
        check("cuMemRelease", cuMemRelease(handle[i]));
        release_us[i] = now_us() - t;
    }
    double free_released = free_gib();
    if (gap_ms > 0) {
        struct timespec pause = {gap_ms / 1000, (gap_ms % 1000) * 1000000L};
        nanosleep(&pause, NULL);
    }
    size_t part = size[1] / b_parts;
    for (int k = 0; k < 2; k++) {
        int i = argv[4][k] - 'a';
        double t = now_us();
        if (i == 0 || b_parts == 1) {
            check("cuMemCreate", cuMemCreate(&handle[i], size[i], &prop, 0));
        } else {
            for (int p = 0; p < b_parts; p++) {
                double tp = now_us();
                check("cuMemCreate", cuMemCreate(&parts[p], part, &prop, 0));
                if (now_us() - tp > slowest_part_us) slowest_part_us = now_us() - tp;
            }
        }
        create_us[i] = now_us() - t;
    }
    double t = now_us();
    for (int i = 0; i < 2; i++) {
        if (i == 1 && b_parts > 1) {
            for (int p = 0; p < b_parts; p++) check("cuMemMap", cuMemMap(va[1] + p * part, part, 0, parts[p], 0));
        } else {
            check("cuMemMap", cuMemMap(va[i], size[i], 0, handle[i], 0));
        }
        check("cuMemSetAccess", cuMemSetAccess(va[i], size[i], &access, 1));
    }
    double map_access_us = now_us() - t;
    printf("{\"test\":\"release-order\",\"a_gib\":%.0f,\"b_gib\":%.0f,\"release\":\"%s\",\"create\":\"%s\",\"gap_ms\":%d,"
           "\"b_parts\":%d,\"release_a_us\":%.1f,\"release_b_us\":%.1f,\"create_a_us\":%.1f,\"create_b_us\":%.1f,"
           "\"slowest_b_part_us\":%.1f,\"map_access_us\":%.1f,"
           "\"free_gib_used\":%.2f,\"free_gib_released\":%.2f,\"free_gib_end\":%.2f}\n",
           size[0] / (double)(1ull << 30), size[1] / (double)(1ull << 30), argv[3], argv[4], gap_ms, b_parts,
           release_us[0], release_us[1], create_us[0], create_us[1], slowest_part_us, map_access_us, free_used, free_released, free_gib());
    return 0;
}
