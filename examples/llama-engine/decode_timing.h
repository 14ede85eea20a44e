/*
 * Where one request's decoding time went, when the engine's "timing" option is 1: the time spent
 * queueing each token's decode (llama_decode), waiting for it (llama_get_logits_ith), choosing the
 * token (the top-k pass and the sampler), the rest of the loop (the log-softmax and the text
 * piece) and the host's callback (on_token), the last two while the device decodes the next token,
 * beside the loop's wall time. The wait is the device's share; the others, on the critical path or not, are the
 * engine's. Logged at info level once per request, so the served path can be compared with
 * bench/decode_rate.c's plain loop.
 */
#ifndef LLAMA_ENGINE_DECODE_TIMING_H
#define LLAMA_ENGINE_DECODE_TIMING_H

#include <time.h>

typedef struct {
    int on;
    double start, mark;
    double queue, wait, pick, rest, host;
} DecodeTiming;

static inline double decode_timing_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* Starts the clock (the generated tokens' loop). */
static inline void decode_timing_start(DecodeTiming* t, int on) {
    *t = (DecodeTiming){.on = on};
    if (on) t->start = t->mark = decode_timing_now();
}

/* Adds the time since the last mark to *phase (one of t's fields) and marks now. */
static inline void decode_timing_add(DecodeTiming* t, double* phase) {
    if (!t->on) return;
    double now = decode_timing_now();
    *phase += now - t->mark;
    t->mark = now;
}

#endif
