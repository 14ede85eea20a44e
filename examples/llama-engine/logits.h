/* What the engine computes from one token's logits: the largest ones, the log-softmax, a sample. */
#ifndef LLAMA_ENGINE_LOGITS_H
#define LLAMA_ENGINE_LOGITS_H

/* The k largest logits in descending order into values (k <= n; of equal ones, the lower id first);
 * ids[0] is the most likely token. With copy not NULL, all n logits are copied there in the same pass. */
void logits_top(const float* logits, int n, int k, float* values, int* ids, float* copy);

/* log(sum(exp(logits[i] - max))): subtracted from (logit - max) it gives the log-softmax. */
float logits_log_sum_exp(const float* logits, int n, float max);

/* A token drawn from softmax(logits / temperature), u uniform in [0, 1); max is the largest logit. */
int logits_sample(const float* logits, int n, float max, float temperature, double u);

#endif
