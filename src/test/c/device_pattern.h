/*
 * device_pattern.h: filling device memory with a pattern and checking it bit for bit, through host
 * copies, for the test programs. The includer defines CHECK(cond) and `scenario` (its name in
 * failure messages) first.
 */
#ifndef VMMKIT_DEVICE_PATTERN_H
#define VMMKIT_DEVICE_PATTERN_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_runtime_subset.h"

static uint64_t word(uint64_t seed, size_t i) { return (i + 1) * 0x9E3779B97F4A7C15ull ^ seed; }

/* Writes the pattern of `seed` into the first `bytes` of `device`. */
static void upload(void *device, size_t bytes, uint64_t seed) {
    uint64_t *host = malloc(bytes);
    CHECK(host);
    for (size_t i = 0; i < bytes / 8; i++) host[i] = word(seed, i);
    CHECK(cudaMemcpy(device, host, bytes, H2D) == 0);
    free(host);
}

/* The first `bytes` of `device` hold the pattern of `seed`, bit for bit. */
static void check(const void *device, size_t bytes, uint64_t seed) {
    uint64_t *host = malloc(bytes);
    CHECK(host);
    CHECK(cudaDeviceSynchronize() == 0);
    CHECK(cudaMemcpy(host, device, bytes, D2H) == 0);
    for (size_t i = 0; i < bytes / 8; i++) {
        if (host[i] != word(seed, i)) {
            fprintf(stderr, "FAIL %s: word %zu of %zu differs\n", scenario, i, bytes / 8);
            exit(1);
        }
    }
    free(host);
}
#endif
