/*
 * Test fixture engine plugin, built in several variants by the Maven build (pom, antrun):
 *   FIXTURE_MAJOR 1 / 2                 the good plugin, versions "1.0.0" and "2.0.0" (hot reload)
 *   FIXTURE_ABI 2                       reports the wrong ABI version
 *   FIXTURE_OMIT_GENERATE               lacks engine_generate
 *   FIXTURE_FAIL_LOAD                   engine_load_model returns an error code
 *   FIXTURE_NAME slow FIXTURE_DELAY_MS 300   the slow one
 * FIXTURE_NAME sets engine_id (default fixture). Option "delay_ms": N (manifest "options") sets
 * the time every engine_generate takes, in ms (default FIXTURE_DELAY_MS, else 0).
 *
 * Behaviour the tests rely on:
 *   - engine_load_model takes device memory the size of the model file plus a 4 KiB scratch
 *     buffer, and fills the weights with a byte pattern;
 *   - engine_generate returns 2 tokens: [calls so far in this instance, major version], each with
 *     logprobs {-0.5, -1.5}; the prompt "fail" returns -3 (an engine error);
 *   - engine_shutdown gives back the scratch buffer only: the host must free the weights itself.
 */
#include "vmmkit/engine_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* Set from the build line as bare words (no quotes survive it): -DFIXTURE_MAJOR=2 -DFIXTURE_NAME=slow */
#define FIXTURE_STRING(x) FIXTURE_STRING2(x)
#define FIXTURE_STRING2(x) #x
#ifndef FIXTURE_MAJOR
#define FIXTURE_MAJOR 1
#endif
#ifndef FIXTURE_NAME
#define FIXTURE_NAME fixture
#endif
#define FIXTURE_VERSION FIXTURE_STRING(FIXTURE_MAJOR) ".0.0"
#define FIXTURE_ID FIXTURE_STRING(FIXTURE_NAME)
#ifndef FIXTURE_DELAY_MS
#define FIXTURE_DELAY_MS 0
#endif
#ifndef FIXTURE_ABI
#define FIXTURE_ABI ENGINE_ABI_VERSION
#endif

static EngineInfo info = {FIXTURE_ABI, FIXTURE_ID, FIXTURE_VERSION};
static EngineConfig host;
static unsigned char* weights;
static void* scratch;
static size_t weights_bytes;
static long delay_ms = FIXTURE_DELAY_MS;
static uint32_t calls;
static TokenResult results[2];
static float logprobs[2][2];

EngineInfo* engine_get_info(void) {
    return &info;
}

int engine_init(EngineConfig* config) {
    host = *config;
    const char* key = config->options_json ? strstr(config->options_json, "\"delay_ms\"") : NULL;
    if (key) {
        const char* colon = strchr(key, ':');
        if (colon) delay_ms = strtol(colon + 1, NULL, 10);
    }
    host.log(host.ctx, 1, "fixture " FIXTURE_VERSION " initialised");
    return 0;
}

int engine_load_model(const char* model_path) {
#ifdef FIXTURE_FAIL_LOAD
    host.log(host.ctx, 3, "fixture: refusing to load the model (built to fail)");
    (void)model_path;
    return -7;
#else
    struct stat st;
    if (stat(model_path, &st) != 0) return -1;
    weights_bytes = (size_t)st.st_size;
    scratch = host.alloc_device(host.ctx, 4096);
    weights = host.alloc_device(host.ctx, weights_bytes);
    if (!scratch || !weights) {
        host.log(host.ctx, 2, "fixture: out of device memory");
        return -2;
    }
    memset(weights, 0xA5, weights_bytes);
    return 0;
#endif
}

#ifndef FIXTURE_OMIT_GENERATE
int engine_generate(const char* prompt, TokenResult** out) {
    if (strcmp(prompt, "fail") == 0) return -3;
    if (weights_bytes > 0 && weights[weights_bytes - 1] != 0xA5) return -4;
    if (delay_ms > 0) {
        struct timespec pause = {delay_ms / 1000, (delay_ms % 1000) * 1000000L};
        nanosleep(&pause, NULL);
    }
    calls++;
    results[0].token_id = calls;
    results[1].token_id = FIXTURE_MAJOR;
    for (int i = 0; i < 2; i++) {
        logprobs[i][0] = -0.5f;
        logprobs[i][1] = -1.5f;
        results[i].logprobs = logprobs[i];
        results[i].logprobs_len = 2;
    }
    *out = results;
    return 2;
}
#endif

void engine_shutdown(void) {
    if (scratch) host.free_device(host.ctx, scratch);
    scratch = NULL;
}
