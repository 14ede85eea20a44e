/*
 * pause_test.c: a CUDA program that pauses and resumes tagged memory, run under `vmmkit run`
 * (InterposeEndToEndTest's stand-in runtime on the host emulation, or a real GPU). It uses the
 * runtime API only, and finds vmmkit's functions with dlsym, as a program that may run without
 * vmmkit does (their declarations come from include/vmmkit/vmmkit.h).
 *
 *   pause_test weights-kv TOTAL_MIB   weights (kept, mixed sizes) and a KV cache (discarded) fill
 *                                     most of a TOTAL_MIB device; both are paused; another phase
 *                                     allocates most of the device; both are resumed and the
 *                                     weights are checked bit for bit at their old addresses.
 *                                     Also: allocations into a paused tag fail, frees of its
 *                                     pointers work, unknown tags and unbalanced regions are refused.
 *   pause_test default-tag            every allocation outside a region, this thread's and another's
 *                                     (as autograd's device threads make gradients), carries the
 *                                     default tag (vmmkit_default_tag, kept): one pause gives it all
 *                                     back but what an untagged region (NULL) made; while paused an
 *                                     allocation outside regions fails; after the resume every byte
 *                                     is back at its address. NULL clears the default;
 *                                     vmmkit_release_cached gives the freed blocks' pages back.
 *   pause_test capture                a pause and a resume while a stream capture is under way are
 *                                     refused with cudaErrorStreamCaptureUnsupported and do nothing;
 *                                     after the capture's end both work (the stand-in runtime's
 *                                     capture, on a made-up stream handle).
 * Prints "ok <scenario>" and exits 0, or exits 1 at the first failure.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_runtime_subset.h"
#include "vmmkit/vmmkit.h"

cudaError_t cudaStreamBeginCapture(cudaStream_t, int);
cudaError_t cudaStreamEndCapture(cudaStream_t, void **);

static const char *scenario = "";
#define CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "FAIL %s: %s (pause_test.c:%d)\n", scenario, #cond, __LINE__); exit(1); } } while (0)
#define MIB ((size_t) 1 << 20)
#define KIB ((size_t) 1 << 10)

static __typeof__(vmmkit_region_begin) *region_begin;
static __typeof__(vmmkit_region_end) *region_end;
static __typeof__(vmmkit_pause) *pause_tag;
static __typeof__(vmmkit_resume) *resume_tag;
static __typeof__(vmmkit_host_memory) *host_memory;
static __typeof__(vmmkit_default_tag) *default_tag;
static __typeof__(vmmkit_release_cached) *release_cached;

#include "device_pattern.h"

static void weights_kv(size_t total_mib) {
    scenario = "weights-kv";
    size_t total = total_mib * MIB;
    /* Weights: a quarter of the device in mixed sizes. */
    size_t sizes[] = {4 * KIB, 3 * MIB, 512, 700 * KIB, 1 * MIB + 8, 96 * KIB, total / 8, 40 * KIB, total / 16};
    enum { N = sizeof sizes / sizeof sizes[0] };
    void *weights[N];
    CHECK(region_begin("weights", 1) == 0);
    for (int i = 0; i < N; i++) {
        CHECK(cudaMalloc(&weights[i], sizes[i]) == 0);
        upload(weights[i], sizes[i], 100 + i);
    }
    CHECK(region_end() == 0);
    /* The KV cache: another quarter, discarded by a pause. */
    void *kv[2];
    CHECK(region_begin("kv_cache", 0) == 0);
    CHECK(cudaMallocAsync(&kv[0], total / 8, NULL) == 0);
    CHECK(cudaMalloc(&kv[1], total / 8) == 0);
    CHECK(region_end() == 0);
    upload(kv[0], total / 8, 7);

    CHECK(pause_tag(NULL) == 0);
    CHECK(pause_tag("weights") == 0); /* paused already: nothing to do */

    /* While paused: allocations into the tag fail, frees work, bad calls are refused. */
    void *refused = NULL;
    CHECK(region_begin("weights", 1) == 0);
    CHECK(cudaMalloc(&refused, 4096) == 2); /* cudaErrorMemoryAllocation */
    CHECK(region_end() == 0);
    CHECK(cudaFree(weights[0]) == 0);
    CHECK(pause_tag("no such tag") == 1);
    CHECK(resume_tag("no such tag") == 1);
    CHECK(region_end() == 1); /* no region open */
    CHECK(region_begin("", 0) == 1);

    /* Another phase takes what the tags gave back: more than fits beside them. */
    void *other = NULL;
    size_t other_bytes = total - total / 8;
    CHECK(cudaMalloc(&other, other_bytes) == 0);
    upload(other, other_bytes, 55);
    check(other, other_bytes, 55);
    CHECK(cudaFree(other) == 0);

    CHECK(resume_tag(NULL) == 0);
    CHECK(resume_tag("kv_cache") == 0); /* running already */
    for (int i = 1; i < N; i++) check(weights[i], sizes[i], 100 + i);
    upload(kv[0], total / 8, 8); /* usable again; its old contents were discarded */
    check(kv[0], total / 8, 8);
    upload(kv[1], total / 8, 9);
    check(kv[1], total / 8, 9);

    /* The tag allocates again once resumed. */
    void *more = NULL;
    CHECK(region_begin("weights", 1) == 0);
    CHECK(cudaMalloc(&more, 1 * MIB) == 0);
    CHECK(region_end() == 0);
    CHECK(cudaFree(more) == 0);

    /* A second cycle, one tag at a time. */
    CHECK(pause_tag("weights") == 0);
    CHECK(resume_tag("weights") == 0);
    for (int i = 1; i < N; i++) check(weights[i], sizes[i], 100 + i);
    /* The resume kept the host memory of the copies for the next pause. */
    size_t pinned = 0, ready = 0;
    CHECK(host_memory(NULL, &ready) == 1);
    CHECK(host_memory(&pinned, &ready) == 0);
    CHECK(ready >= total / 8 + total / 16 && pinned >= ready);
    for (int i = 1; i < N; i++) CHECK(cudaFree(weights[i]) == 0);
    CHECK(cudaFree(kv[0]) == 0);
    CHECK(cudaFree(kv[1]) == 0);
    printf("ok %s\n", scenario);
}

static void *allocate_on_another_thread(void *out) {
    if (cudaMalloc((void **) out, 2 * MIB) != 0) return NULL;
    upload(*(void **) out, 2 * MIB, 31);
    return out;
}

static void default_tag_scenario(void) {
    scenario = "default-tag";
    void *before = NULL, *weights = NULL, *gradient = NULL, *untagged = NULL, *refused = NULL;
    CHECK(cudaMalloc(&before, 64 * KIB) == 0); /* before the default: untagged */
    upload(before, 64 * KIB, 29);
    CHECK(default_tag("", 1) == 1);
    CHECK(default_tag("default", 1) == 0);
    CHECK(cudaMalloc(&weights, 3 * MIB + 17) == 0);
    upload(weights, 3 * MIB + 17, 30);
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, allocate_on_another_thread, &gradient) == 0);
    void *done = NULL;
    CHECK(pthread_join(thread, &done) == 0 && done == &gradient);
    CHECK(region_begin(NULL, 0) == 0); /* a region of no tag: the default's allocations left out */
    CHECK(cudaMalloc(&untagged, 128 * KIB) == 0);
    upload(untagged, 128 * KIB, 32);
    CHECK(region_end() == 0);

    CHECK(pause_tag("default") == 0);
    CHECK(cudaMalloc(&refused, 4096) == 2); /* outside regions: into the paused default tag */
    check(before, 64 * KIB, 29);
    check(untagged, 128 * KIB, 32);
    CHECK(resume_tag(NULL) == 0);
    check(weights, 3 * MIB + 17, 30);
    check(gradient, 2 * MIB, 31);

    CHECK(default_tag(NULL, 0) == 0);
    CHECK(pause_tag("default") == 0);
    void *plain = NULL;
    CHECK(cudaMalloc(&plain, 4096) == 0); /* no default tag any more */
    CHECK(resume_tag("default") == 0);
    check(weights, 3 * MIB + 17, 30);
    void *all[] = {before, weights, gradient, untagged, plain};
    for (unsigned i = 0; i < sizeof all / sizeof all[0]; i++) CHECK(cudaFree(all[i]) == 0);
    size_t released = 0;
    CHECK(release_cached(&released) == 0 && released >= 5 * MIB); /* the freed blocks' pages, back to the device */
    CHECK(release_cached(NULL) == 0);
    printf("ok %s\n", scenario);
}

static void capture(void) {
    scenario = "capture";
    enum { STREAM_CAPTURE_UNSUPPORTED = 900 };
    cudaStream_t stream = (cudaStream_t) 0x5100;
    void *kv = NULL, *graph = NULL;
    CHECK(region_begin("kv_cache", 0) == 0);
    CHECK(cudaMalloc(&kv, 4 * MIB) == 0);
    CHECK(region_end() == 0);
    upload(kv, 4 * MIB, 3);

    CHECK(cudaStreamBeginCapture(stream, 0) == 0);
    CHECK(pause_tag("kv_cache") == STREAM_CAPTURE_UNSUPPORTED);
    CHECK(pause_tag(NULL) == STREAM_CAPTURE_UNSUPPORTED);
    CHECK(pause_tag("no such tag") == 1); /* an unknown tag is still the first thing said */
    CHECK(cudaStreamEndCapture(stream, &graph) == 0);
    check(kv, 4 * MIB, 3); /* the refused pause gave nothing back */

    CHECK(pause_tag("kv_cache") == 0);
    CHECK(cudaStreamBeginCapture(stream, 0) == 0);
    CHECK(resume_tag("kv_cache") == STREAM_CAPTURE_UNSUPPORTED);
    CHECK(cudaStreamEndCapture(stream, &graph) == 0);
    CHECK(resume_tag("kv_cache") == 0);
    upload(kv, 4 * MIB, 4); /* usable again */
    check(kv, 4 * MIB, 4);
    CHECK(cudaFree(kv) == 0);
    printf("ok %s\n", scenario);
}

int main(int argc, char **argv) {
    region_begin = (__typeof__(region_begin)) dlsym(RTLD_DEFAULT, "vmmkit_region_begin");
    region_end = (__typeof__(region_end)) dlsym(RTLD_DEFAULT, "vmmkit_region_end");
    pause_tag = (__typeof__(pause_tag)) dlsym(RTLD_DEFAULT, "vmmkit_pause");
    resume_tag = (__typeof__(resume_tag)) dlsym(RTLD_DEFAULT, "vmmkit_resume");
    host_memory = (__typeof__(host_memory)) dlsym(RTLD_DEFAULT, "vmmkit_host_memory");
    default_tag = (__typeof__(default_tag)) dlsym(RTLD_DEFAULT, "vmmkit_default_tag");
    release_cached = (__typeof__(release_cached)) dlsym(RTLD_DEFAULT, "vmmkit_release_cached");
    if (!region_begin || !region_end || !pause_tag || !resume_tag || !host_memory || !default_tag || !release_cached) {
        fprintf(stderr, "pause_test: vmmkit's functions are not in this process (run it under vmmkit run)\n");
        return 1;
    }
    if (argc >= 3 && strcmp(argv[1], "weights-kv") == 0) {
        weights_kv((size_t) atol(argv[2]));
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "capture") == 0) {
        capture();
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "default-tag") == 0) {
        default_tag_scenario();
        return 0;
    }
    fprintf(stderr, "usage: pause_test weights-kv TOTAL_MIB | capture | default-tag\n");
    return 2;
}
