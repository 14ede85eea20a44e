/*
 * The per-token arithmetic over the whole vocabulary (tens of thousands of logits), on the CPU
 * beside a GPU that decodes a token in a millisecond or two, so it must stay in the microseconds:
 * this file is built with -O3 -ffast-math (vectorised expf through glibc's libmvec; logits are
 * finite) and the sums get an AVX2 clone picked at load time.
 */
#include "logits.h"

#include <math.h>

void logits_top(const float* logits, int n, int k, float* values, int* ids) {
    int filled = 0;
    for (int i = 0; i < n; i++) {
        float value = logits[i];
        if (filled == k && value <= values[k - 1]) continue;   /* the common case: one compare */
        int at = filled < k ? filled++ : k - 1;
        while (at > 0 && values[at - 1] < value) {
            values[at] = values[at - 1];
            ids[at] = ids[at - 1];
            at--;
        }
        values[at] = value;
        ids[at] = i;
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
