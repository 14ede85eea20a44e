/*
 * The per-token arithmetic over the whole vocabulary (tens of thousands of logits), on the CPU
 * beside a GPU that decodes a token in a millisecond or two, so it must stay in the microseconds:
 * this file is built with -O3 -ffast-math (vectorised expf through glibc's libmvec; logits are
 * finite) and the sums get an AVX2 clone picked at load time.
 */
#include "logits.h"

#include <math.h>

/* Keeps value among the k largest so far (values descending, filled of them). */
static inline void keep_if_top(float value, int id, int k, float* values, int* ids, int* filled) {
    if (*filled == k && value <= values[k - 1]) return;
    int at = *filled < k ? (*filled)++ : k - 1;
    while (at > 0 && values[at - 1] < value) {
        values[at] = values[at - 1];
        ids[at] = ids[at - 1];
        at--;
    }
    values[at] = value;
    ids[at] = id;
}

/* Blocks of logits: a block whose largest value cannot enter the top k (the common case once k are
 * found) costs one vectorised pass, its copy included, and no per-logit branch. */
enum { BLOCK = 64 };

__attribute__((target_clones("avx2", "default")))
void logits_top(const float* logits, int n, int k, float* values, int* ids, float* copy) {
    int filled = 0;
    for (int start = 0; start < n; start += BLOCK) {
        int end = n - start < BLOCK ? n : start + BLOCK;
        float block_max = logits[start];
        if (copy) {
            for (int i = start; i < end; i++) {
                copy[i] = logits[i];
                block_max = fmaxf(block_max, logits[i]);
            }
        } else {
            for (int i = start; i < end; i++) block_max = fmaxf(block_max, logits[i]);
        }
        if (filled == k && block_max <= values[k - 1]) continue;
        for (int i = start; i < end; i++) keep_if_top(logits[i], i, k, values, ids, &filled);
    }
}

__attribute__((target_clones("avx2", "default")))
float logits_log_sum_exp(const float* logits, int n, float max) {
    float total = 0;
    for (int i = 0; i < n; i++) total += expf(logits[i] - max);
    return logf(total);
}

__attribute__((target_clones("avx2", "default")))
static float scaled_sum(const float* logits, int n, float max, float scale) {
    float total = 0;
    for (int i = 0; i < n; i++) total += expf((logits[i] - max) * scale);
    return total;
}

int logits_sample(const float* logits, int n, float max, float temperature, double u) {
    float scale = 1.0f / temperature;
    double target = u * scaled_sum(logits, n, max, scale);
    for (int i = 0; i < n; i++) {
        target -= expf((logits[i] - max) * scale);
        if (target <= 0) return i;
    }
    return n - 1;
}
