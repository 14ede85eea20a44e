/*
 * Reads the engine's options from the manifest's "options" JSON object. The host has already
 * checked that it is a JSON object; the values this engine reads are plain numbers and one word,
 * so a small scanner does: it finds "key" followed by ':' and reads the value after it.
 */
#include "engine_options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char* skip_space(const char* p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

/* Where key's value begins (after "key" and ':'), or NULL when the key is absent. */
static const char* value_of(const char* json, const char* key) {
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\"", key);
    for (const char* at = json ? strstr(json, quoted) : NULL; at; at = strstr(at + 1, quoted)) {
        const char* p = skip_space(at + strlen(quoted));
        if (*p == ':') return skip_space(p + 1);   /* else the key's text inside a string value, not a key */
    }
    return NULL;
}

/* Finds the number given for key; 1 when found (value set), 0 when absent, -1 when not a number. */
static int number(const char* json, const char* key, double* value) {
    const char* p = value_of(json, key);
    if (!p) return 0;
    char* end;
    *value = strtod(p, &end);
    return end == p ? -1 : 1;
}

/* flash_attn: "auto", "on" or "off" (llama-server's words for -fa), as llama.cpp's -1, 1, 0. */
static int read_flash_attn(const char* json, int* out, char* error, size_t size) {
    const char* p = value_of(json, "flash_attn");
    if (!p) return 0;
    static const char* const words[] = {"\"off\"", "\"on\"", "\"auto\""};
    for (int i = 0; i < 3; i++) {
        size_t length = strlen(words[i]);
        if (!strncmp(p, words[i], length)) {
            *out = i == 2 ? -1 : i;
            return 0;
        }
    }
    snprintf(error, size, "option \"flash_attn\" must be \"auto\", \"on\" or \"off\"");
    return -1;
}

static int read_int(const char* json, const char* key, long min, long max, int* out, char* error, size_t size) {
    double value;
    int found = number(json, key, &value);
    if (found == 0) return 0;
    if (found < 0 || value != (double)(long)value || value < min || value > max) {
        snprintf(error, size, "option \"%s\" must be a whole number from %ld to %ld", key, min, max);
        return -1;
    }
    *out = (int)value;
    return 0;
}

/* top_p: a fraction of the probability, 0 to 1 (0 keeps only the most likely token). */
static int read_top_p(const char* json, float* out, char* error, size_t size) {
    double value;
    int found = number(json, "top_p", &value);
    if (found < 0 || (found && !(value >= 0 && value <= 1))) {
        snprintf(error, size, "\"top_p\" must be a number from 0 to 1");
        return -1;
    }
    if (found) *out = (float)value;
    return 0;
}

int engine_options_threads(const EngineOptions* o, int every_layer_on_gpu) {
    if (o->threads > 0) return o->threads;
    /* Every layer on the GPU: the CPU's share of a token is a few small operations, and each of
     * ggml's threads that went to sleep while the engine chose the token is woken at the next
     * decode. With 8 threads llama_decode took 140 us of CPU per token after the engine's choice,
     * with 2 threads 88 (an H100, docs/engine.md); llama-bench ran as fast with 2 as with 8. */
    if (every_layer_on_gpu) return 2;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return (int)(cpus < 1 ? 1 : cpus > 8 ? 8 : cpus);
}

int engine_options_parse(const char* json, EngineOptions* o, char* error, size_t size) {
    *o = (EngineOptions){
        .max_tokens = 32, .temperature = 0.0f, .top_p = 1.0f, .seed = 42, .top_k = 5, .context_size = 2048,
        .threads = 0, .gpu_layers = -1, .flash_attn = -1,
    };
    if (read_int(json, "max_tokens", 1, 1 << 20, &o->max_tokens, error, size)
        || read_int(json, "top_k", 0, 1 << 20, &o->top_k, error, size)
        || read_int(json, "context_size", 16, 1 << 24, &o->context_size, error, size)
        || read_int(json, "threads", 1, 1024, &o->threads, error, size)
        || read_int(json, "gpu_layers", -1, 100000, &o->gpu_layers, error, size)
        || read_int(json, "timing", 0, 1, &o->timing, error, size)
        || read_flash_attn(json, &o->flash_attn, error, size)) {
        return -1;
    }
    double value;
    int found = number(json, "temperature", &value);
    if (found < 0 || (found && !(value >= 0 && value <= 100))) {
        snprintf(error, size, "option \"temperature\" must be a number from 0 to 100");
        return -1;
    }
    if (found) o->temperature = (float)value;
    if (read_top_p(json, &o->top_p, error, size)) return -1;
    found = number(json, "seed", &value);
    if (found < 0 || (found && !(value >= 0 && value <= 9007199254740992.0 && value == (double)(uint64_t)value))) {
        snprintf(error, size, "option \"seed\" must be a whole number from 0 to 2^53");
        return -1;
    }
    if (found) o->seed = (uint64_t)value;
    return 0;
}

int engine_request_parse(const char* json, const EngineOptions* defaults, EngineRequest* r, char* error, size_t size) {
    *r = (EngineRequest){.max_tokens = defaults->max_tokens, .temperature = defaults->temperature, .top_p = defaults->top_p,
                         .seed = defaults->seed};
    double value;
    int found = number(json, "max_tokens", &value);
    if (found < 0 || (found && !(value >= 0 && value <= 1073741824.0 && value == (double)(long)value))) {
        snprintf(error, size, "\"max_tokens\" must be a whole number from 0 to 2^30");
        return -1;
    }
    if (found) r->max_tokens = (long)value;
    found = number(json, "temperature", &value);
    if (found < 0 || (found && !(value >= 0 && value <= 100))) {
        snprintf(error, size, "\"temperature\" must be a number from 0 to 100");
        return -1;
    }
    if (found) r->temperature = (float)value;
    if (read_top_p(json, &r->top_p, error, size)) return -1;
    found = number(json, "seed", &value);
    if (found < 0 || (found && !(value >= -9007199254740992.0 && value <= 9007199254740992.0))) {
        snprintf(error, size, "\"seed\" must be a whole number");
        return -1;
    }
    if (found) r->seed = (uint64_t)(int64_t)value;
    return 0;
}
