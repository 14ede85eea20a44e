/*
 * fann_engine: a vmmkit engine plugin over a real inference library, FANN (Fast Artificial Neural
 * Network, Debian package libfann-dev, LGPL-2.1). It serves character-level language models:
 * a FANN network saved with fann_save() (format "net") whose inputs and outputs are one-hot over
 * the vocabulary " abcdefghijklmnopqrstuvwxyz" (27 symbols). Generation is greedy: the last
 * character of the prompt goes in, the most likely next character comes out and goes in again.
 * Each token's logprobs are the log-softmax of the network's 27 outputs.
 *
 * FANN computes on the CPU, so this is a cpu-backend engine; it still mirrors the network's
 * weights into device memory from the host (alloc_device), so the host accounts the model's size.
 *
 *   gcc -O2 -fPIC -shared -I../../include -o libfann_engine.so fann_engine.c -lfloatfann -lm
 */
#define ENGINE_ABI_VERSION 1  /* non-streaming: engine_generate returns all tokens at once */
#include "vmmkit/engine_api.h"

#include <floatfann.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define VOCAB 27
#define TOKENS 8

static const char symbols[VOCAB + 1] = " abcdefghijklmnopqrstuvwxyz";
static EngineInfo info = {ENGINE_ABI_VERSION, "fann", "2.2.0"};
static EngineConfig host;
static struct fann* net;
static void* weights_on_device;
static TokenResult results[TOKENS];
static float logprobs[TOKENS][VOCAB];

static int symbol_index(char c) {
    const char* at = strchr(symbols + 1, c);
    return c && at ? (int)(at - symbols) : 0;
}

EngineInfo* engine_get_info(void) {
    return &info;
}

int engine_init(EngineConfig* config) {
    host = *config;
    return 0;
}

int engine_load_model(const char* model_path) {
    net = fann_create_from_file(model_path);
    if (!net) {
        host.log(host.ctx, 3, "fann: cannot read the network file");
        return -1;
    }
    if (fann_get_num_input(net) != VOCAB || fann_get_num_output(net) != VOCAB) {
        host.log(host.ctx, 3, "fann: the network needs 27 inputs and 27 outputs");
        return -2;
    }
    unsigned int connections = fann_get_total_connections(net);
    size_t bytes = (size_t)connections * sizeof(fann_type);
    weights_on_device = host.alloc_device(host.ctx, bytes);
    if (!weights_on_device) return -3;
    /* device -1: the memory is host-addressable; on a CUDA device a CPU engine only reserves it. */
    if (host.device < 0) memcpy(weights_on_device, net->weights, bytes);
    char line[160];
    snprintf(line, sizeof line, "fann: loaded %u neurons, %u connections", fann_get_total_neurons(net), connections);
    host.log(host.ctx, 1, line);
    return 0;
}

int engine_generate(const char* prompt, TokenResult** out) {
    size_t length = strlen(prompt);
    int current = length ? symbol_index(prompt[length - 1]) : 0;
    for (int t = 0; t < TOKENS; t++) {
        fann_type input[VOCAB] = {0};
        input[current] = 1;
        fann_type* output = fann_run(net, input);
        int best = 0;
        double max = output[0], sum = 0;
        for (int i = 1; i < VOCAB; i++) if (output[i] > max) max = output[best = i];
        for (int i = 0; i < VOCAB; i++) sum += exp(output[i] - max);
        for (int i = 0; i < VOCAB; i++) logprobs[t][i] = (float)(output[i] - max - log(sum));
        results[t].token_id = (uint32_t)best;
        results[t].logprobs = logprobs[t];
        results[t].logprobs_len = VOCAB;
        current = best;
    }
    *out = results;
    return TOKENS;
}

void engine_shutdown(void) {
    if (weights_on_device) host.free_device(host.ctx, weights_on_device);
    weights_on_device = NULL;
    if (net) fann_destroy(net);
    net = NULL;
}
