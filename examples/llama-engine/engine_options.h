/* The llama engine's settings, read from the manifest's "options" object (options_json). */
#ifndef LLAMA_ENGINE_OPTIONS_H
#define LLAMA_ENGINE_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int max_tokens;     /* "max_tokens": tokens decoded per request, at most (default 32) */
    float temperature;  /* "temperature": 0 = greedy (default); > 0 samples from softmax(logits / t) */
    float top_p;        /* "top_p": samples only from the most likely tokens that make up this much probability (default 1: all) */
    uint64_t seed;      /* "seed": the sampler's seed, the same for every request (default 42) */
    int top_k;          /* "top_k": log-probabilities per token, the k largest (default 5); 0 = all, indexed by token id */
    int context_size;   /* "context_size": tokens of context (default 2048, at most the model's) */
    int threads;        /* "threads": CPU threads; 0 (the default): engine_options_threads chooses */
    int gpu_layers;     /* "gpu_layers": layers offloaded to the GPU in the CUDA build (default all, -1) */
    int flash_attn;     /* "flash_attn": "auto" (default, llama.cpp's choice), "on" or "off": -1, 1, 0 as llama.cpp counts */
    int timing;         /* "timing": 1 logs where each request's decoding time went (decode_timing.h); default 0 */
} EngineOptions;

/* One request's settings (ABI version 2's request_json), over the engine's options. */
typedef struct {
    long max_tokens;    /* "max_tokens" (default: the options' max_tokens) */
    float temperature;  /* "temperature" */
    float top_p;        /* "top_p" */
    uint64_t seed;      /* "seed" */
} EngineRequest;

/* Fills *request from json over defaults. Returns 0, or -1 with a message in error for a bad value. */
int engine_request_parse(const char* json, const EngineOptions* defaults, EngineRequest* request, char* error, size_t error_size);

/* The CPU threads to run with: the option when set, else 2 when every layer is on the GPU, else the
 * online CPUs, at most 8. */
int engine_options_threads(const EngineOptions* options, int every_layer_on_gpu);

/* Fills *options from json (NULL = defaults). Returns 0, or -1 with a message in error for a bad value. */
int engine_options_parse(const char* json, EngineOptions* options, char* error, size_t error_size);

#endif
