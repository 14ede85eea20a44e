/*
 * echo_engine: a complete vmmkit engine plugin to copy when writing your own (see README.md).
 *
 * It "loads" a model by taking device memory the size of the model file from the host
 * (alloc_device), writing a pattern into it and reading it back, and "generates" a few tokens from
 * a hash of the prompt and a byte read back from its device memory. So every request proves that
 * the memory it was given holds real bytes.
 *
 * One build serves both backends (the Makefile installs it under cpu/ and cuda/):
 *   gcc -O2 -fPIC -shared -I../../include -o libecho_engine.so echo_engine.c -ldl
 * Where the host's device memory lives is told by config->device: -1 means no CUDA device, and the
 * memory is addressed directly (on the host emulation it is host memory); N >= 0 means CUDA device
 * N, reached with cuMemcpyHtoD/DtoH from libcuda.so.1, opened at run time, so no CUDA headers or
 * SDK are needed to build.
 *
 * Globals are fine: the host loads a private copy of this library for each model.
 *
 * It speaks ABI version 2 (engine_generate_stream: the prompt's bytes come back one token each,
 * up to the request's max_tokens, default 8, each handed to the host's callback as it is made), or
 * version 1 when built with -DENGINE_ABI_VERSION=1 (engine_generate: at most 8 tokens at once).
 */
#include "vmmkit/engine_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef ECHO_VERSION
#define ECHO_VERSION "1.0.0"  /* keep equal to manifest.json's "version" */
#endif
#define MAX_TOKENS 8
#define CHUNK (1u << 20)

#include <dlfcn.h>

/* The few CUDA driver API prototypes used, declared here instead of including cuda.h. */
typedef int (*cuInit_t)(unsigned int);
typedef int (*cuDeviceGet_t)(int*, int);
typedef int (*cuDevicePrimaryCtxRetain_t)(void**, int);
typedef int (*cuDevicePrimaryCtxRelease_t)(int);
typedef int (*cuCtxSetCurrent_t)(void*);
typedef int (*cuMemcpyHtoD_t)(unsigned long long, const void*, size_t);
typedef int (*cuMemcpyDtoH_t)(void*, unsigned long long, size_t);
static struct {
    cuDevicePrimaryCtxRelease_t release;
    cuCtxSetCurrent_t set_current;
    cuMemcpyHtoD_t htod;
    cuMemcpyDtoH_t dtoh;
    void* context;
    int device;
} cu;
static int on_cuda;  /* 1 when alloc_device memory is on a CUDA device */

static EngineInfo info = {ENGINE_ABI_VERSION, "echo", ECHO_VERSION};
static EngineConfig host;          /* copied at init: callbacks stay valid until shutdown */
static unsigned char* weights;     /* device memory holding the "model" */
static size_t weights_bytes;
static unsigned char model_seed;
#if ENGINE_ABI_VERSION == 1
static TokenResult results[MAX_TOKENS];
static float logprobs[MAX_TOKENS][3];
#endif

static void say(int level, const char* format, const char* detail) {
    char line[512];
    snprintf(line, sizeof line, format, detail);
    host.log(host.ctx, level, line);
}

/* Copies between host and device memory: plain memcpy on the cpu backend, the driver on cuda. */
static int upload(size_t offset, const void* from, size_t bytes) {
    if (on_cuda) {
        if (cu.set_current(cu.context) != 0) return -1;
        return cu.htod((unsigned long long)(weights + offset), from, bytes) == 0 ? 0 : -1;
    }
    memcpy(weights + offset, from, bytes);
    return 0;
}

static int download(void* to, size_t offset, size_t bytes) {
    if (on_cuda) {
        if (cu.set_current(cu.context) != 0) return -1;
        return cu.dtoh(to, (unsigned long long)(weights + offset), bytes) == 0 ? 0 : -1;
    }
    memcpy(to, weights + offset, bytes);
    return 0;
}

static int open_cuda(int device) {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return -1;
    cuInit_t init = (cuInit_t)dlsym(lib, "cuInit");
    cuDeviceGet_t get = (cuDeviceGet_t)dlsym(lib, "cuDeviceGet");
    cuDevicePrimaryCtxRetain_t retain = (cuDevicePrimaryCtxRetain_t)dlsym(lib, "cuDevicePrimaryCtxRetain");
    cu.release = (cuDevicePrimaryCtxRelease_t)dlsym(lib, "cuDevicePrimaryCtxRelease");
    cu.set_current = (cuCtxSetCurrent_t)dlsym(lib, "cuCtxSetCurrent");
    cu.htod = (cuMemcpyHtoD_t)dlsym(lib, "cuMemcpyHtoD_v2");
    cu.dtoh = (cuMemcpyDtoH_t)dlsym(lib, "cuMemcpyDtoH_v2");
    if (!init || !get || !retain || !cu.release || !cu.set_current || !cu.htod || !cu.dtoh) return -2;
    if (init(0) != 0 || get(&cu.device, device) != 0 || retain(&cu.context, cu.device) != 0) return -3;
    return 0;
}

ENGINE_API EngineInfo* engine_get_info(void) {
    return &info;
}

ENGINE_API int engine_init(EngineConfig* config) {
    host = *config;
    on_cuda = config->device >= 0;
    if (on_cuda && open_cuda(config->device) != 0) {
        say(3, "echo: cannot use CUDA (%s, or the device given)", "libcuda.so.1");
        return -1;
    }
    say(1, "echo engine " ECHO_VERSION " initialised, device memory %s", on_cuda ? "on CUDA" : "host-addressable");
    return 0;
}

ENGINE_API int engine_load_model(const char* model_path) {
    struct stat st;
    if (stat(model_path, &st) != 0) {
        say(3, "echo: cannot stat %s", model_path);
        return -1;
    }
    weights_bytes = st.st_size > 0 ? (size_t)st.st_size : 1;
    weights = host.alloc_device(host.ctx, weights_bytes);
    if (!weights) {
        say(2, "echo: no device memory for %s", model_path);
        return -2;
    }
    for (const char* p = model_path; *p; p++) model_seed = (unsigned char)(model_seed * 31 + *p);
    /* Fill the weights with a pattern, chunk by chunk, then read the first and last chunk back. */
    unsigned char* chunk = malloc(CHUNK);
    unsigned char* back = malloc(CHUNK);
    int rc = chunk && back ? 0 : -3;
    for (size_t off = 0; rc == 0 && off < weights_bytes; off += CHUNK) {
        size_t n = weights_bytes - off < CHUNK ? weights_bytes - off : CHUNK;
        for (size_t i = 0; i < n; i++) chunk[i] = (unsigned char)((off + i) * 7 + model_seed);
        rc = upload(off, chunk, n);
    }
    size_t checks[2] = {0, weights_bytes > CHUNK ? (weights_bytes - 1) / CHUNK * CHUNK : 0};
    for (int c = 0; rc == 0 && c < 2; c++) {
        size_t off = checks[c];
        size_t n = weights_bytes - off < CHUNK ? weights_bytes - off : CHUNK;
        rc = download(back, off, n);
        for (size_t i = 0; rc == 0 && i < n; i++) {
            if (back[i] != (unsigned char)((off + i) * 7 + model_seed)) rc = -4;
        }
    }
    free(chunk);
    free(back);
    if (rc != 0) {
        say(3, "echo: device memory for %s did not read back as written", model_path);
        return rc;
    }
    say(1, "echo: loaded %s (pattern written and read back)", model_path);
    return 0;
}

#if ENGINE_ABI_VERSION == 1
ENGINE_API int engine_generate(const char* prompt, TokenResult** out) {
    uint32_t hash = 2166136261u;
    for (const char* p = prompt; *p; p++) hash = (hash ^ (unsigned char)*p) * 16777619u;
    size_t count = strlen(prompt);
    if (count == 0) count = 1;
    if (count > MAX_TOKENS) count = MAX_TOKENS;
    for (size_t i = 0; i < count; i++) {
        size_t offset = (hash + i * 4099u) % weights_bytes;
        unsigned char byte;
        if (download(&byte, offset, 1) != 0) return -5;
        if (byte != (unsigned char)(offset * 7 + model_seed)) return -6;  /* memory lost its bytes */
        results[i].token_id = (hash + (uint32_t)i * 7919u + byte) % 32000u;
        logprobs[i][0] = -0.05f * (float)(i + 1);
        logprobs[i][1] = -1.5f;
        logprobs[i][2] = -3.0f;
        results[i].logprobs = logprobs[i];
        results[i].logprobs_len = 3;
    }
    *out = results;
    return (int)count;
}
#else
/* The integer after "key": in request_json, or fallback; enough JSON for the few numbers used here. */
static long option(const char* json, const char* key, long fallback) {
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\"", key);
    const char* at = json ? strstr(json, quoted) : NULL;
    if (!at) return fallback;
    at = strchr(at + strlen(quoted), ':');
    return at ? strtol(at + 1, NULL, 10) : fallback;
}

ENGINE_API int engine_generate_stream(const char* prompt, const char* request_json, EngineTokenCallback on_token,
                                      void* user, EngineGenerateResult* result) {
    uint32_t hash = 2166136261u;
    size_t length = strlen(prompt);
    for (const char* p = prompt; *p; p++) hash = (hash ^ (unsigned char)*p) * 16777619u;
    long max_tokens = option(request_json, "max_tokens", MAX_TOKENS);
    long top = option(request_json, "top_logprobs", 0);
    if (top > 3) top = 3;
    result->prompt_tokens = (int32_t)(length > 0 ? length : 1);
    result->finish_reason = ENGINE_FINISH_LENGTH;
    for (long i = 0; i < max_tokens; i++) {
        size_t offset = (hash + (size_t)i * 4099u) % weights_bytes;
        unsigned char byte;
        if (download(&byte, offset, 1) != 0) { result->finish_reason = ENGINE_FINISH_ERROR; return -5; }
        if (byte != (unsigned char)(offset * 7 + model_seed)) { result->finish_reason = ENGINE_FINISH_ERROR; return -6; }
        /* The piece is one byte of the prompt, so a multi-byte character arrives split across tokens. */
        char piece = length > 0 ? prompt[(size_t)i % length] : ' ';
        uint32_t ids[3] = {(unsigned char)piece, (hash + (uint32_t)i * 7919u + byte) % 32000u, 32000u + (uint32_t)i % 7};
        float lps[3] = {-0.05f * (float)(i % 20 + 1), -1.5f, -3.0f};
        EngineToken token = {ids[0], &piece, 1, lps[0], ids, lps, (size_t)top};
        if (on_token(user, &token) != 0) {
            result->finish_reason = ENGINE_FINISH_CANCELLED;
            return 0;
        }
    }
    return 0;
}

#ifdef ECHO_CHAT_TEMPLATE
/*
 * The optional chat template, in a build for the host's tests (-DECHO_CHAT_TEMPLATE): each message
 * as "[role] content\n", then "[assistant] ". A message whose content is "none", "fail" or "grow"
 * makes it answer ENGINE_CHAT_TEMPLATE_NONE, an error, or a length that never fits the buffer.
 */
ENGINE_API int64_t engine_apply_chat_template(const EngineChatMessage* messages, size_t count, int32_t add_assistant,
                                              char* out, size_t out_size) {
    static const char reply[] = "[assistant] ";
    size_t length = add_assistant ? strlen(reply) : 0;
    for (size_t i = 0; i < count; i++) {
        if (strcmp(messages[i].content, "none") == 0) return ENGINE_CHAT_TEMPLATE_NONE;
        if (strcmp(messages[i].content, "fail") == 0) return -7;
        if (strcmp(messages[i].content, "grow") == 0) return (int64_t)out_size;
        length += strlen(messages[i].role) + strlen(messages[i].content) + 4;   /* "[" "] " "\n" */
    }
    if (length >= out_size) return (int64_t)length;
    char* at = out;
    for (size_t i = 0; i < count; i++) at += sprintf(at, "[%s] %s\n", messages[i].role, messages[i].content);
    strcpy(at, add_assistant ? reply : "");
    return (int64_t)length;
}
#endif
#endif

ENGINE_API void engine_shutdown(void) {
    if (weights) host.free_device(host.ctx, weights);
    weights = NULL;
    if (on_cuda && cu.context) cu.release(cu.device);  /* the retain made in engine_init */
    cu.context = NULL;
    say(1, "echo engine %s shut down", ECHO_VERSION);
}
