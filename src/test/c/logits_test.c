/*
 * The llama engine's per-token arithmetic (examples/llama-engine/logits.c, built as the engine
 * builds it) against plain reference code: logits_top's k largest values and ids (of equal values,
 * the lower id first) and its copy, over random vocabularies with many ties, every k up to 8 and
 * the whole vocabulary, sizes around the block size; logits_log_sum_exp against a double sum.
 * Prints "logits_test: ok" and exits 0, or names the first case that differs and exits 1.
 */
#include "logits.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long state = 88172645463325252ull;

static unsigned long long next_random(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

/* The k largest by a selection over the whole array: the largest first, the lower id on a tie. */
static void reference_top(const float* logits, int n, int k, float* values, int* ids) {
    char* taken = calloc((size_t)n, 1);
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            if (!taken[i] && (best < 0 || logits[i] > logits[best])) best = i;
        }
        taken[best] = 1;
        values[j] = logits[best];
        ids[j] = best;
    }
    free(taken);
}

static int check(int n, int k, int distinct_values, int with_copy) {
    float* logits = malloc((size_t)n * sizeof *logits);
    float* copy = malloc((size_t)n * sizeof *copy);
    float *values = malloc((size_t)k * sizeof *values), *expected_values = malloc((size_t)k * sizeof *values);
    int *ids = malloc((size_t)k * sizeof *ids), *expected_ids = malloc((size_t)k * sizeof *ids);
    for (int i = 0; i < n; i++) logits[i] = (float)(next_random() % (unsigned)distinct_values) / 8.0f - 20.0f;
    memset(copy, 0, (size_t)n * sizeof *copy);
    logits_top(logits, n, k, values, ids, with_copy ? copy : NULL);
    reference_top(logits, n, k, expected_values, expected_ids);
    int failed = 0;
    for (int j = 0; j < k && !failed; j++) {
        if (values[j] != expected_values[j] || ids[j] != expected_ids[j]) {
            printf("logits_test: n %d k %d distinct %d: place %d is id %d (%g), expected id %d (%g)\n", n, k,
                   distinct_values, j, ids[j], values[j], expected_ids[j], expected_values[j]);
            failed = 1;
        }
    }
    if (!failed && with_copy && memcmp(copy, logits, (size_t)n * sizeof *copy) != 0) {
        printf("logits_test: n %d k %d: the copy differs from the logits\n", n, k);
        failed = 1;
    }
    if (!failed) {
        double sum = 0;
        for (int i = 0; i < n; i++) sum += exp((double)logits[i] - expected_values[0]);
        float got = logits_log_sum_exp(logits, n, expected_values[0]);
        if (fabs(got - log(sum)) > 1e-4 * (1 + fabs(log(sum)))) {
            printf("logits_test: n %d: log-sum-exp %g, expected %g\n", n, got, log(sum));
            failed = 1;
        }
    }
    free(logits); free(copy); free(values); free(expected_values); free(ids); free(expected_ids);
    return failed;
}

int main(void) {
    static const int sizes[] = {1, 2, 63, 64, 65, 127, 128, 129, 1000, 32000};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int n = sizes[s];
        for (int k = 1; k <= 8 && k <= n; k++) {
            for (int distinct = 1; distinct <= 4096; distinct *= 8) {
                if (check(n, k, distinct, k % 2) != 0) return 1;
            }
        }
        if (n <= 1000 && check(n, n, 16, 1) != 0) return 1;   /* the whole vocabulary, ordered */
    }
    printf("logits_test: ok\n");
    return 0;
}
