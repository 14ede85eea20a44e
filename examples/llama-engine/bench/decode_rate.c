/*
 * Tokens per second of a plain llama.cpp decode loop, with settings chosen on the command line:
 * the native figures between llama-bench's (no prompt, no token choice: a random next token) and
 * what the llama engine does per request (its context, a prompt, the most likely next token read
 * from the logits). scripts/gpu/llama.sh runs it natively and under `vmmkit run`, so the gap
 * between llama-bench and `vmmkit serve` splits into llama.cpp's settings, vmmkit's memory and
 * the host.
 *
 *   decode_rate MODEL [--tokens N] [--reps N] [--ctx N] [--batch N] [--threads N]
 *               [--fa on|off|auto] [--prompt TEXT] [--pick random|touch|greedy|engine] [--graphs-log]
 *
 * --pick: how the next token is chosen. random: no logits read (llama-bench's way); touch: the
 * logits' address taken (llama_get_logits_ith) and the token still random; greedy: a plain scan for
 * the largest logit; engine: the engine's own pass (logits.c: the top 5 and a copy of the row).
 * Prints "decode_rate: tokens_per_s MEDIAN (min MIN, max MAX, REPS runs of N tokens) SETTINGS".
 * Each run starts from an empty KV cache; one run before them warms up. --graphs-log prints
 * llama.cpp's log lines that mention CUDA graphs (debug level included), which say when and why
 * ggml's CUDA backend stops replaying a captured graph.
 */
#define _GNU_SOURCE
#include "ggml-backend.h"
#include "llama.h"
#include "logits.h"

#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int graphs_log;

static void on_log(enum ggml_log_level level, const char* text, void* user) {
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR || (graphs_log && strstr(text, "CUDA graph"))) fputs(text, stderr);
}

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static int compare_doubles(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

static int argmax(const float* logits, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) if (logits[i] > logits[best]) best = i;
    return best;
}

enum pick { PICK_RANDOM, PICK_TOUCH, PICK_GREEDY, PICK_ENGINE };

static const char* const pick_names[] = {"random", "touch", "greedy", "engine"};

/* The next token after a decode, as pick says; waits for the decode. */
static llama_token next_token(struct llama_context* context, enum pick pick, int vocab_size, float* scratch) {
    if (pick == PICK_RANDOM) {
        llama_synchronize(context);
        return rand() % vocab_size;
    }
    const float* logits = llama_get_logits_ith(context, -1);
    if (pick == PICK_TOUCH) return logits ? rand() % vocab_size : 0;
    if (pick == PICK_GREEDY) return argmax(logits, vocab_size);
    float top[5];
    int ids[5];
    logits_top(logits, vocab_size, 5, top, ids, scratch);
    return ids[0];
}

/* Over every timed run: time in llama_decode (queueing a token), and in waiting for it and choosing the next. */
static double queue_seconds, wait_and_pick_seconds;

/* One run: the prompt (if any) in one batch, then tokens decoded one at a time. Seconds spent on
 * the generated tokens only, or a negative number when a decode fails. */
static double one_run(struct llama_context* context, const llama_token* prompt, int prompt_count, int tokens,
                      enum pick pick, int vocab_size, llama_token first, float* scratch) {
    llama_memory_clear(llama_get_memory(context), true);
    llama_token token = first;
    if (prompt_count > 0) {
        if (llama_decode(context, llama_batch_get_one((llama_token*)prompt, prompt_count)) != 0) return -1;
        token = next_token(context, pick, vocab_size, scratch);
    }
    double start = now_seconds();
    for (int i = 0; i < tokens; i++) {
        double t0 = now_seconds();
        if (llama_decode(context, llama_batch_get_one(&token, 1)) != 0) return -1;
        double t1 = now_seconds();
        token = next_token(context, pick, vocab_size, scratch);
        queue_seconds += t1 - t0;
        wait_and_pick_seconds += now_seconds() - t1;
    }
    return now_seconds() - start;
}

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: decode_rate MODEL [--tokens N] [--reps N] [--ctx N] [--batch N] [--threads N] "
                        "[--fa on|off|auto] [--prompt TEXT] [--pick random|touch|greedy|engine] [--graphs-log]\n");
        return 2;
    }
    const char* model_path = argv[1];
    int tokens = 128, reps = 5, ctx = 256, batch = 0, threads = 8;
    enum pick pick = PICK_GREEDY;
    const char* fa = "off";
    const char* prompt_text = "";
    for (int i = 2; i < argc; i++) {
        const char* name = argv[i];
        const char* value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(name, "--graphs-log")) { graphs_log = 1; continue; }
        if (!value) { fprintf(stderr, "decode_rate: %s needs a value\n", name); return 2; }
        i++;
        if (!strcmp(name, "--tokens")) tokens = atoi(value);
        else if (!strcmp(name, "--reps")) reps = atoi(value);
        else if (!strcmp(name, "--ctx")) ctx = atoi(value);
        else if (!strcmp(name, "--batch")) batch = atoi(value);
        else if (!strcmp(name, "--threads")) threads = atoi(value);
        else if (!strcmp(name, "--fa")) fa = value;
        else if (!strcmp(name, "--prompt")) prompt_text = value;
        else if (!strcmp(name, "--pick")) {
            int known = 0;
            for (int p = 0; p < 4; p++) if (!strcmp(value, pick_names[p])) pick = (enum pick)p, known = 1;
            if (!known) { fprintf(stderr, "decode_rate: --pick is random, touch, greedy or engine\n"); return 2; }
        }
        else { fprintf(stderr, "decode_rate: unknown option %s\n", name); return 2; }
    }
    if (tokens < 1 || reps < 1 || reps > 1000 || ctx < tokens || threads < 1) {
        fprintf(stderr, "decode_rate: need tokens >= 1, 1 <= reps <= 1000, ctx >= tokens, threads >= 1\n");
        return 2;
    }
    llama_log_set(on_log, NULL);
    /* A build with its backends as loadable modules (the npm package's) keeps them beside libggml. */
    Dl_info where;
    if (!ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU) && dladdr((void*)ggml_backend_load_all_from_path, &where)
        && where.dli_fname) {
        char path[4096];
        snprintf(path, sizeof path, "%s", where.dli_fname);
        ggml_backend_load_all_from_path(dirname(path));
    }
    llama_backend_init();
    struct llama_model_params model_params = llama_model_default_params();
    model_params.n_gpu_layers = 999;
    struct llama_model* model = llama_model_load_from_file(model_path, model_params);
    if (!model) { fprintf(stderr, "decode_rate: cannot load %s\n", model_path); return 1; }
    const struct llama_vocab* vocab = llama_model_get_vocab(model);
    int vocab_size = llama_vocab_n_tokens(vocab);

    struct llama_context_params params = llama_context_default_params();
    params.n_ctx = (uint32_t)ctx;
    if (batch > 0) params.n_batch = (uint32_t)batch;
    params.n_threads = threads;
    params.n_threads_batch = threads;
    params.flash_attn_type = !strcmp(fa, "on") ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                           : !strcmp(fa, "auto") ? LLAMA_FLASH_ATTN_TYPE_AUTO : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    struct llama_context* context = llama_init_from_model(model, params);
    if (!context) { fprintf(stderr, "decode_rate: cannot make a context of %d tokens\n", ctx); return 1; }

    llama_token prompt[512];
    int prompt_count = 0;
    if (*prompt_text) {
        prompt_count = llama_tokenize(vocab, prompt_text, (int)strlen(prompt_text), prompt, 512,
                                      llama_vocab_get_add_bos(vocab), true);
        if (prompt_count < 0 || prompt_count + tokens > ctx) { fprintf(stderr, "decode_rate: prompt too long\n"); return 2; }
    }
    llama_token first = llama_vocab_get_add_bos(vocab) ? llama_vocab_bos(vocab) : 0;
    srand(1);
    double* rates = malloc((size_t)reps * sizeof *rates);
    float* scratch = malloc((size_t)vocab_size * sizeof *scratch);
    for (int r = -1; r < reps; r++) {
        if (r == 0) queue_seconds = wait_and_pick_seconds = 0;   /* the untimed first run warms up */
        double seconds = one_run(context, prompt, prompt_count, tokens, pick, vocab_size, first, scratch);
        if (seconds < 0) { fprintf(stderr, "decode_rate: a decode failed\n"); return 1; }
        if (r >= 0) rates[r] = tokens / seconds;
    }
    qsort(rates, (size_t)reps, sizeof *rates, compare_doubles);
    printf("decode_rate: tokens_per_s %.1f (min %.1f, max %.1f, %d runs of %d tokens) ctx %u batch %u threads %d fa %s "
           "prompt %d tokens pick %s; per token: queue %.1f us, wait and pick %.1f us\n", rates[reps / 2], rates[0],
           rates[reps - 1], reps, tokens, llama_n_ctx(context), llama_n_batch(context), threads, fa, prompt_count,
           pick_names[pick], queue_seconds * 1e6 / ((double)reps * tokens), wait_and_pick_seconds * 1e6 / ((double)reps * tokens));
    free(rates);
    free(scratch);
    llama_free(context);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
