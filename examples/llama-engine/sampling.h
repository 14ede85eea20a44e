/* How the engine picks each next token from the logits: greedily, or drawn with a seeded generator. */
#ifndef LLAMA_ENGINE_SAMPLING_H
#define LLAMA_ENGINE_SAMPLING_H

#include <stdint.h>

/* One request's sampler. */
typedef struct {
    float temperature;  /* 0: the most likely token; > 0: drawn from softmax(logits / temperature) */
    float top_p;        /* < 1: drawn only from the nucleus, the most likely tokens that make up top_p of that distribution */
    uint64_t random;    /* the generator's state, starting at the request's seed */
} Sampling;

/* The next token; best is the most likely one. Returns -1 when memory for the nucleus ran out. */
int sampling_choose(Sampling* sampling, const float* logits, int n, int best);

/* Frees what sampling_choose kept between calls (at engine_shutdown). */
void sampling_free(void);

#endif
