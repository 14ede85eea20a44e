/*
 * Test fixture engine plugin, built in several variants by the Maven build (pom, antrun):
 *   FIXTURE_MAJOR 1 / 2                 the good plugin, versions "1.0.0" and "2.0.0" (hot reload)
 *   FIXTURE_ABI 2                       reports the wrong ABI version
 *   FIXTURE_OMIT_GENERATE               lacks engine_generate
 *   FIXTURE_FAIL_LOAD                   engine_load_model returns an error code
 *   FIXTURE_NAME slow FIXTURE_DELAY_MS 300   the slow one
 *   FIXTURE_NAME faulty                 the one the isolation tests make crash (options below)
 *   FIXTURE_INFO_FAULT                  segfaults in engine_get_info (the probe must not take the host down)
 *   FIXTURE_CUDA                        also allocates with the CUDA runtime itself (linked with -lcudart):
 *                                       option "cuda_load_mib": N takes N MiB with cudaMalloc in
 *                                       engine_load_model (freed by engine_shutdown); the prompt "cuda:N"
 *                                       takes N MiB more in engine_generate (never freed by the engine);
 *                                       a cudaMalloc that fails makes the call fail (-6)
 * FIXTURE_NAME sets engine_id (default fixture). Option "delay_ms": N (manifest "options") sets
 * the time every engine_generate takes, in ms (default FIXTURE_DELAY_MS, else 0).
 *
 * Faults, for the isolation tests (manifest "options"): "fault": "segv" | "abort" | "exit" | "hang"
 * and "fault_in": "init" | "load" | "generate" | "shutdown". In init, load and shutdown the fault
 * fires on every call; in generate only for the prompt "crash", so the model serves other prompts.
 *
 * Option "load_log": FILE makes every engine_load_model that succeeds append one line (the model's
 * path) to FILE, so a test counts how often the model file was loaded.
 *
 * Hooks, so tests order events without sleeping: with option "hook_dir": DIR, the prompt
 * "hold:NAME" writes one byte to the FIFO DIR/NAME.entered when it is inside engine_generate,
 * then waits for one byte from DIR/NAME.release. It returns a third token: the most calls that
 * were inside engine_generate at once in this instance so far.
 *
 * Behaviour the tests rely on:
 *   - engine_load_model takes device memory the size of the model file plus a 4 KiB scratch
 *     buffer, and fills the weights with a byte pattern (checked by engine_generate) when that
 *     memory is host-addressable (config->device -1: the host emulation);
 *   - engine_generate returns 2 tokens: [calls so far in this instance, major version], each with
 *     logprobs {-0.5, -1.5}; the prompt "fail" returns -3 (an engine error); the prompt "verify"
 *     checks every byte of the weights (host-addressable memory only) and returns -4 when one differs;
 *   - engine_shutdown gives back the scratch buffer only: the host must free the weights itself.
 */
#include "vmmkit/engine_api.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
#ifdef FIXTURE_CUDA
/* The two runtime functions used, declared as libcudart exports them (no CUDA headers needed). */
int cudaMalloc(void** ptr, size_t size);
int cudaFree(void* ptr);
static void* cuda_weights;
static long cuda_load_mib;
#endif
static EngineConfig host;
static unsigned char* weights;
static void* scratch;
static size_t weights_bytes;
static long delay_ms = FIXTURE_DELAY_MS;
static uint32_t calls;
static TokenResult results[3];
static float logprobs[3][2];
static char fault[16];
static char fault_in[16];
static char hook_dir[512];
static char load_log[512];
static int inside, most_inside;

/* The string value of "key" in the options JSON (no escapes: the tests' values have none). */
static void option_string(const char* json, const char* key, char* out, size_t size) {
    out[0] = 0;
    const char* at = json ? strstr(json, key) : NULL;
    if (!at) return;
    at = strchr(at + strlen(key), ':');
    if (!at) return;
    at = strchr(at, '"');
    if (!at) return;
    at++;
    size_t n = 0;
    while (at[n] && at[n] != '"' && n + 1 < size) n++;
    memcpy(out, at, n);
    out[n] = 0;
}

/* Crashes, exits or hangs as the options say, when the fault is set for `where`. */
static void maybe_fault(const char* where) {
    if (strcmp(fault_in, where) != 0) return;
    if (strcmp(fault, "segv") == 0) {
        volatile int* nowhere = NULL;
        *nowhere = 1;
    } else if (strcmp(fault, "abort") == 0) {
        abort();
    } else if (strcmp(fault, "exit") == 0) {
        exit(3);
    } else if (strcmp(fault, "hang") == 0) {
        for (;;) pause();
    }
}

/* One byte through a FIFO the test made: 'w' writes it, 'r' waits for it. */
static int hook(const char* name, const char* suffix, char direction) {
    char path[640];
    snprintf(path, sizeof path, "%s/%s.%s", hook_dir, name, suffix);
    int fd = open(path, O_RDWR);
    if (fd < 0) return -1;
    char byte = 1;
    ssize_t n = direction == 'w' ? write(fd, &byte, 1) : read(fd, &byte, 1);
    close(fd);
    return n == 1 ? 0 : -1;
}

EngineInfo* engine_get_info(void) {
#ifdef FIXTURE_INFO_FAULT
    volatile int* nowhere = NULL;
    *nowhere = 1;
#endif
    return &info;
}

int engine_init(EngineConfig* config) {
    host = *config;
    const char* key = config->options_json ? strstr(config->options_json, "\"delay_ms\"") : NULL;
    if (key) {
        const char* colon = strchr(key, ':');
        if (colon) delay_ms = strtol(colon + 1, NULL, 10);
    }
    option_string(config->options_json, "\"fault\"", fault, sizeof fault);
    option_string(config->options_json, "\"fault_in\"", fault_in, sizeof fault_in);
    option_string(config->options_json, "\"hook_dir\"", hook_dir, sizeof hook_dir);
    option_string(config->options_json, "\"load_log\"", load_log, sizeof load_log);
#ifdef FIXTURE_CUDA
    const char* mib = config->options_json ? strstr(config->options_json, "\"cuda_load_mib\"") : NULL;
    if (mib && strchr(mib, ':')) cuda_load_mib = strtol(strchr(mib, ':') + 1, NULL, 10);
#endif
    maybe_fault("init");
    host.log(host.ctx, 1, "fixture " FIXTURE_VERSION " initialised");
    return 0;
}

int engine_load_model(const char* model_path) {
#ifdef FIXTURE_FAIL_LOAD
    host.log(host.ctx, 3, "fixture: refusing to load the model (built to fail)");
    (void)model_path;
    return -7;
#else
    maybe_fault("load");
    struct stat st;
    if (stat(model_path, &st) != 0) return -1;
    weights_bytes = (size_t)st.st_size;
    scratch = host.alloc_device(host.ctx, 4096);
    weights = host.alloc_device(host.ctx, weights_bytes);
    if (!scratch || !weights) {
        host.log(host.ctx, 2, "fixture: out of device memory");
        return -2;
    }
    if (host.device < 0) memset(weights, 0xA5, weights_bytes); /* on a CUDA device it is not CPU memory */
#ifdef FIXTURE_CUDA
    if (cuda_load_mib > 0) {
        if (cudaMalloc(&cuda_weights, (size_t)cuda_load_mib << 20) != 0) {
            host.log(host.ctx, 2, "fixture: cudaMalloc failed in engine_load_model");
            return -6;
        }
    }
#endif
    if (load_log[0]) {
        FILE* log = fopen(load_log, "a");
        if (!log) return -8;
        fprintf(log, "%s\n", model_path);
        fclose(log);
    }
    return 0;
#endif
}

#ifndef FIXTURE_OMIT_GENERATE
int engine_generate(const char* prompt, TokenResult** out) {
    if (strcmp(prompt, "fail") == 0) return -3;
    if (strcmp(prompt, "crash") == 0) maybe_fault("generate");
#ifdef FIXTURE_CUDA
    if (strncmp(prompt, "cuda:", 5) == 0) {
        void* more;
        if (cudaMalloc(&more, (size_t)strtol(prompt + 5, NULL, 10) << 20) != 0) return -6;
    }
#endif
    int held = strncmp(prompt, "hold:", 5) == 0;
    if (held) {
        int now = __atomic_add_fetch(&inside, 1, __ATOMIC_SEQ_CST);
        int most = __atomic_load_n(&most_inside, __ATOMIC_SEQ_CST);
        while (now > most && !__atomic_compare_exchange_n(&most_inside, &most, now, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
        }
        int failed = hook(prompt + 5, "entered", 'w') || hook(prompt + 5, "release", 'r');
        __atomic_sub_fetch(&inside, 1, __ATOMIC_SEQ_CST);
        if (failed) return -5;
    }
    if (host.device < 0 && weights_bytes > 0 && weights[weights_bytes - 1] != 0xA5) return -4;
    if (host.device < 0 && strcmp(prompt, "verify") == 0) {
        for (size_t i = 0; i < weights_bytes; i++) {
            if (weights[i] != 0xA5) return -4;
        }
    }
    if (delay_ms > 0) {
        struct timespec pause = {delay_ms / 1000, (delay_ms % 1000) * 1000000L};
        nanosleep(&pause, NULL);
    }
    uint32_t call = __atomic_add_fetch(&calls, 1, __ATOMIC_SEQ_CST);
    if (held) {
        /* per-thread results: held calls of a concurrent engine return side by side */
        static __thread TokenResult mine[3];
        static __thread float mine_logprobs[3][2];
        mine[0].token_id = call;
        mine[1].token_id = FIXTURE_MAJOR;
        mine[2].token_id = (uint32_t)__atomic_load_n(&most_inside, __ATOMIC_SEQ_CST);
        for (int i = 0; i < 3; i++) {
            mine_logprobs[i][0] = -0.5f;
            mine_logprobs[i][1] = -1.5f;
            mine[i].logprobs = mine_logprobs[i];
            mine[i].logprobs_len = 2;
        }
        *out = mine;
        return 3;
    }
    results[0].token_id = call;
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
    maybe_fault("shutdown");
    if (scratch) host.free_device(host.ctx, scratch);
    scratch = NULL;
#ifdef FIXTURE_CUDA
    if (cuda_weights) cudaFree(cuda_weights);
    cuda_weights = NULL;
#endif
}
