/*
 * Token choice. Greedy takes the most likely token. With a temperature, a splitmix64 generator
 * seeded per request draws one uniform number per token, so the same seed gives the same tokens.
 * With top_p below 1 the draw is from the nucleus only: the temperature scales the logits first
 * (as OpenAI's API and Hugging Face's samplers order them), then llama.cpp's own top-p sampler
 * keeps the most likely tokens whose probabilities add up to top_p (at least one), and the draw is
 * over their renormalised probabilities. top_p 1 is no nucleus at all, the same path as no top_p.
 */
#include "sampling.h"

#include "logits.h"
#include "llama.h"

#include <stdlib.h>

static llama_token_data* candidates;   /* n entries, refilled per token */
static int candidates_size;
static struct llama_sampler* nucleus;  /* llama.cpp's top-p sampler for nucleus_p */
static float nucleus_p;

static double next_uniform(uint64_t* state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;   /* 53 bits: [0, 1) */
}

static int nucleus_draw(const float* logits, int n, float temperature, float top_p, double u) {
    if (candidates_size < n) {
        llama_token_data* grown = realloc(candidates, (size_t)n * sizeof *grown);
        if (!grown) return -1;
        candidates = grown;
        candidates_size = n;
    }
    if (!nucleus || nucleus_p != top_p) {
        if (nucleus) llama_sampler_free(nucleus);
        nucleus = llama_sampler_init_top_p(top_p, 1);
        nucleus_p = top_p;
        if (!nucleus) return -1;
    }
    float scale = 1.0f / temperature;
    for (int i = 0; i < n; i++) candidates[i] = (llama_token_data){.id = i, .logit = logits[i] * scale, .p = 0.0f};
    llama_token_data_array kept = {.data = candidates, .size = (size_t)n, .selected = -1, .sorted = false};
    llama_sampler_apply(nucleus, &kept);   /* softmax over all n, then the most likely first, cut at top_p */
    double total = 0;
    for (size_t i = 0; i < kept.size; i++) total += kept.data[i].p;
    double target = u * total;
    for (size_t i = 0; i < kept.size; i++) {
        target -= kept.data[i].p;
        if (target <= 0) return kept.data[i].id;
    }
    return kept.data[kept.size - 1].id;
}

int sampling_choose(Sampling* sampling, const float* logits, int n, int best) {
    if (sampling->temperature <= 0) return best;
    double u = next_uniform(&sampling->random);
    if (sampling->top_p < 1.0f) return nucleus_draw(logits, n, sampling->temperature, sampling->top_p, u);
    return logits_sample(logits, n, logits[best], sampling->temperature, u);
}

void sampling_free(void) {
    if (nucleus) llama_sampler_free(nucleus);
    nucleus = NULL;
    free(candidates);
    candidates = NULL;
    candidates_size = 0;
}
