/*
 * llama_engine: a vmmkit engine plugin over llama.cpp, serving GGUF language models.
 *
 * engine_generate_stream (ABI version 2) tokenizes the prompt, decodes it, then decodes up to the
 * request's max_tokens more tokens (the manifest's by default; never past the context), greedily
 * unless a temperature is set (then drawn with a seeded generator, from the nucleus when top_p is
 * below 1: sampling.c), and stops after an end-of-generation token, handing each token's text
 * piece and log-probabilities to the host's callback as soon as it is chosen. The request's
 * max_tokens, temperature, top_p and seed override the manifest's options; stop strings are left
 * to the host. The prompt's text for a special token (e.g. "<|im_start|>") is read as that token,
 * as llama.cpp's server reads it, so a prompt rendered by engine_apply_chat_template (the model's
 * own chat template, through llama_chat_apply_template) reaches the model as the template means.
 * Built with -DENGINE_ABI_VERSION=1 it exports the version 1 engine_generate instead (all tokens
 * at once, the manifest's options only, no chat template). Each token carries the log-softmax of the logits: the top_k largest values in descending order (the first
 * is the chosen token's under greedy decoding), or the whole distribution indexed by token id
 * when top_k is 0. Each request decodes as if from an empty KV cache, with a freshly seeded
 * sampler, so the same prompt gives the same tokens; the same prompt twice in a row reuses the
 * first one's keys, values and logits (prompt_cache.c) and starts generating at once.
 *
 * Where memory lives: on a host without CUDA (EngineConfig.device == -1) the weights go into a
 * buffer type over alloc_device (host_buffer.c), so vmmkit holds and counts them. In the CUDA
 * build, ggml allocates weights, KV cache and compute buffers with the CUDA runtime itself; those
 * allocations reach vmmkit when the engine runs in a process under vmmkit's shim (docs/engine.md).
 *
 * llama.cpp keeps one log callback per process; each instance points it at its own copy of this
 * library while it is loaded, and clears it at shutdown if it is still its own.
 */
#define _GNU_SOURCE   /* dladdr */
#include "vmmkit/engine_api.h"

#include "decode_timing.h"
#include "engine_options.h"
#include "host_buffer.h"
#include "logits.h"
#include "prompt_cache.h"
#include "sampling.h"
#include "llama.h"

#include <dlfcn.h>
#include <libgen.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef LLAMA_ENGINE_VERSION
#define LLAMA_ENGINE_VERSION "3.22.1"
#endif

enum { ERR_OPTIONS = -1, ERR_LOAD = -2, ERR_NO_MEMORY = -3, ERR_CONTEXT = -4, ERR_PROMPT = -5, ERR_DECODE = -6 };

static EngineInfo info = {ENGINE_ABI_VERSION, "llama", LLAMA_ENGINE_VERSION};
static EngineConfig host;
static EngineOptions options;
static struct llama_model* model;
static struct llama_context* context;
static const struct llama_vocab* vocab;
static int vocab_size;
static char last_error[512];   /* llama.cpp's first error line since the load began, for the failure's message */

/* One request's answer: valid until the next call (the ABI's rule 4). */
static TokenResult* results;
static float* logprobs;        /* max_tokens rows of logprobs_width floats */
static int logprobs_width;
static float* scratch;         /* a copy of the logits, read while the next token decodes */
static int* top_ids;
static float scratch_top[1];
static llama_token* prompt_tokens;
static int prompt_capacity;

static void say(int level, const char* format, ...) __attribute__((format(printf, 2, 3)));
static void say(int level, const char* format, ...) {
    char line[768];
    va_list args;
    va_start(args, format);
    vsnprintf(line, sizeof line, format, args);
    va_end(args);
    if (host.log) host.log(host.ctx, level, line);
}

/* llama.cpp's log lines: warnings and errors go to the host's log; the last error is kept. */
static void on_llama_log(enum ggml_log_level level, const char* text, void* user_data) {
    (void)user_data;
    if (level != GGML_LOG_LEVEL_WARN && level != GGML_LOG_LEVEL_ERROR) return;
    char line[512];
    snprintf(line, sizeof line, "%s", text);
    line[strcspn(line, "\n")] = 0;
    if (!line[0]) return;
    if (level == GGML_LOG_LEVEL_ERROR && !last_error[0]) snprintf(last_error, sizeof last_error, "%s", line);  /* the first says most */
    say(level == GGML_LOG_LEVEL_ERROR ? 3 : 2, "llama.cpp: %s", line);
}

/* ggml's CPU code is a loadable backend in the prebuilt libraries, beside libggml: load the best one once per process. */
static void load_backends(void) {
    if (ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU)) return;
    Dl_info where;
    if (dladdr((void*)ggml_backend_load_all_from_path, &where) && where.dli_fname) {
        char path[4096];
        snprintf(path, sizeof path, "%s", where.dli_fname);
        ggml_backend_load_all_from_path(dirname(path));
    }
    if (!ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU)) ggml_backend_load_all();
}

EngineInfo* engine_get_info(void) {
    return &info;
}

int engine_init(EngineConfig* config) {
    host = *config;
    char error[160];
    if (engine_options_parse(config->options_json, &options, error, sizeof error) != 0) {
        say(3, "llama: %s", error);
        return ERR_OPTIONS;
    }
    llama_log_set(on_llama_log, NULL);
    load_backends();
    llama_backend_init();
    return 0;
}

int engine_load_model(const char* model_path) {
    struct llama_model_params model_params = llama_model_default_params();
    struct llama_model_tensor_buft_override everything[2] = {{".*", NULL}, {NULL, NULL}};
    if (host.device < 0) {
        /* No CUDA device: weights in the host's memory; read the file into it rather than mapping it. */
        everything[0].buft = host_buffer_type(&host);
        model_params.tensor_buft_overrides = everything;
        model_params.load_mode = LLAMA_LOAD_MODE_NONE;
        model_params.n_gpu_layers = 0;
    } else {
        model_params.n_gpu_layers = options.gpu_layers;
        model_params.split_mode = LLAMA_SPLIT_MODE_NONE;   /* the whole model on the host's device */
        model_params.main_gpu = host.device;
    }
    last_error[0] = 0;
    model = llama_model_load_from_file(model_path, model_params);
    if (!model) {
        if (host_buffer_ran_out()) return ERR_NO_MEMORY;
        say(3, "llama: cannot load %s as a GGUF model%s%s", model_path, last_error[0] ? ": " : "", last_error);
        return ERR_LOAD;
    }
    vocab = llama_model_get_vocab(model);
    vocab_size = llama_vocab_n_tokens(vocab);

    struct llama_context_params context_params = llama_context_default_params();
    int trained = llama_model_n_ctx_train(model);
    context_params.n_ctx = (uint32_t)(trained > 0 && trained < options.context_size ? trained : options.context_size);
    context_params.n_batch = context_params.n_ctx;
    int layers = llama_model_n_layer(model);
    int every_layer_on_gpu = host.device >= 0 && llama_supports_gpu_offload()
        && (options.gpu_layers < 0 || options.gpu_layers > layers);
    int threads = engine_options_threads(&options, every_layer_on_gpu);
    context_params.n_threads = threads;
    context_params.n_threads_batch = threads;
    context_params.no_perf = true;
    context_params.flash_attn_type = (enum llama_flash_attn_type)options.flash_attn;
    context = llama_init_from_model(model, context_params);
    if (!context) {
        say(3, "llama: cannot make a context of %u tokens%s%s", context_params.n_ctx, last_error[0] ? ": " : "", last_error);
        return ERR_CONTEXT;
    }

    logprobs_width = options.top_k == 0 || options.top_k > vocab_size ? vocab_size : options.top_k;
    results = calloc((size_t)options.max_tokens, sizeof *results);
    logprobs = calloc((size_t)options.max_tokens * (size_t)logprobs_width, sizeof *logprobs);   /* version 2 uses row 0 */
    scratch = malloc((size_t)vocab_size * sizeof *scratch);
    top_ids = malloc((size_t)logprobs_width * sizeof *top_ids);
    if (!results || !logprobs || !scratch || !top_ids) return ERR_NO_MEMORY;
    char description[128];
    llama_model_desc(model, description, sizeof description);
    say(1, "llama: loaded %s (%s, %.1f MiB, vocabulary %d, context %u, %d threads, %s)", model_path, description,
        llama_model_size(model) / 1048576.0, vocab_size, llama_n_ctx(context), threads,
        host.device < 0 ? "weights in vmmkit memory" : "CUDA");
    return 0;
}

/*
 * The prompt's tokens, special tokens' text read as those tokens (parse_special, as llama.cpp's
 * server does). A prompt that begins with the BOS token's text where the model adds one anyway
 * keeps one BOS.
 */
static int tokenize(const char* prompt) {
    int length = (int)strlen(prompt);
    bool add_bos = llama_vocab_get_add_bos(vocab);
    int count = llama_tokenize(vocab, prompt, length, prompt_tokens, prompt_capacity, add_bos, true);
    if (count < 0) {
        llama_token* grown = realloc(prompt_tokens, (size_t)-count * sizeof *grown);
        if (!grown) return ERR_NO_MEMORY;
        prompt_tokens = grown;
        prompt_capacity = -count;
        count = llama_tokenize(vocab, prompt, length, prompt_tokens, prompt_capacity, add_bos, true);
    }
    if (count <= 0) {
        say(3, "llama: the prompt gives no tokens");
        return ERR_PROMPT;
    }
    llama_token bos = llama_vocab_bos(vocab);
    if (add_bos && count >= 2 && prompt_tokens[0] == bos && prompt_tokens[1] == bos) {
        memmove(prompt_tokens, prompt_tokens + 1, (size_t)--count * sizeof *prompt_tokens);
    }
    return count;
}

/*
 * One step's logits into row (the whole vocabulary, or the top logprobs_width with their ids in
 * top_ids), and a copy in scratch for the log-softmax while the next token decodes. Returns the
 * most likely token.
 */
static int take_logits(const float* logits, float* row) {
    int best;
    if (logprobs_width == vocab_size) {
        logits_top(logits, vocab_size, 1, scratch_top, &best, row);
    } else {
        logits_top(logits, vocab_size, logprobs_width, row, top_ids, scratch);
        best = top_ids[0];
    }
    return best;
}

static int decode_failed(int produced) {
    prompt_cache_forget();   /* what a failed decode left in the memory is unknown */
    say(3, "llama: decoding failed after %d tokens%s%s", produced, last_error[0] ? ": " : "", last_error);
    return ERR_DECODE;
}

#if ENGINE_ABI_VERSION == 1
int engine_generate(const char* prompt, TokenResult** out) {
    if (!context) return ERR_CONTEXT;
    int count = tokenize(prompt);
    if (count < 0) return count;
    uint32_t room = llama_n_ctx(context);
    if ((uint32_t)count + (uint32_t)options.max_tokens > room) {
        say(3, "llama: the prompt's %d tokens and %d new ones do not fit the context of %u", count, options.max_tokens, room);
        return ERR_PROMPT;
    }
    Sampling sampling = {.temperature = options.temperature, .top_p = options.top_p, .random = options.seed};
    const float* logits = prompt_start(context, prompt_tokens, count, vocab_size);
    int produced = 0;
    for (;;) {
        if (!logits) return decode_failed(produced);
        float* row = logprobs + (size_t)produced * (size_t)logprobs_width;
        int best = take_logits(logits, row);
        llama_token token = sampling_choose(&sampling, logits, vocab_size, best);
        if (token < 0) return ERR_NO_MEMORY;
        float max = logits[best];
        results[produced] = (TokenResult){.token_id = (uint32_t)token, .logprobs = row, .logprobs_len = (size_t)logprobs_width};
        produced++;
        int more = produced < options.max_tokens && !llama_vocab_is_eog(vocab, token);
        if (more) {
            /* Queue the next token first: the log-softmax below runs while the GPU decodes. */
            prompt_tokens[0] = token;
            if (llama_decode(context, llama_batch_get_one(prompt_tokens, 1)) != 0) return decode_failed(produced);
        }
        const float* all = logprobs_width == vocab_size ? row : scratch;
        float shift = max + logits_log_sum_exp(all, vocab_size, max);
        for (int i = 0; i < logprobs_width; i++) row[i] -= shift;
        if (!more) break;
        logits = llama_get_logits_ith(context, -1);   /* llama_decode only queues the work on a GPU: this waits for it */
    }
    *out = results;
    return produced;
}
#else
/* The token's text as llama.cpp renders it (special tokens too); a piece may be part of a character. */
static int piece(llama_token token, char* buffer, int size) {
    int length = llama_token_to_piece(vocab, token, buffer, size, 0, false);
    return length < 0 ? 0 : length;
}

/* The "timing" option's line for one request (decode_timing.h). */
static void log_timing(const DecodeTiming* t, long tokens) {
    double wall = decode_timing_now() - t->start;
    say(1, "llama: timing: %ld tokens in %.2f ms (%.1f tokens/s): wait %.2f ms, queue %.2f, pick %.2f, rest %.2f, host %.2f "
        "(per token: wait %.1f us, queue %.1f, pick %.1f, rest %.1f, host %.1f)", tokens, wall * 1e3, tokens / wall,
        t->wait * 1e3, t->queue * 1e3, t->pick * 1e3, t->rest * 1e3, t->host * 1e3, t->wait * 1e6 / tokens,
        t->queue * 1e6 / tokens, t->pick * 1e6 / tokens, t->rest * 1e6 / tokens, t->host * 1e6 / tokens);
}

ENGINE_API int engine_generate_stream(const char* prompt, const char* request_json, EngineTokenCallback on_token,
                                      void* user, EngineGenerateResult* result) {
    result->finish_reason = ENGINE_FINISH_ERROR;
    result->prompt_tokens = 0;
    if (!context) return ERR_CONTEXT;
    EngineRequest request;
    char error[160];
    if (engine_request_parse(request_json, &options, &request, error, sizeof error) != 0) {
        say(3, "llama: %s", error);
        return ERR_OPTIONS;
    }
    int count = tokenize(prompt);
    if (count < 0) return count;
    result->prompt_tokens = count;
    uint32_t room = llama_n_ctx(context);
    if ((uint32_t)count >= room) {
        say(3, "llama: the prompt's %d tokens do not fit the context of %u", count, room);
        return ERR_PROMPT;
    }
    long limit = request.max_tokens < (long)(room - (uint32_t)count) ? request.max_tokens : (long)(room - (uint32_t)count);
    result->finish_reason = ENGINE_FINISH_LENGTH;
    if (limit == 0) return 0;
    Sampling sampling = {.temperature = request.temperature, .top_p = request.top_p, .random = request.seed};
    const float* logits = prompt_start(context, prompt_tokens, count, vocab_size);
    float* row = logprobs;   /* one row, reused: the host copies each token out in on_token */
    long produced = 0;
    DecodeTiming timing;
    decode_timing_start(&timing, options.timing);
    for (;;) {
        if (!logits) return decode_failed((int)produced);
        int best = take_logits(logits, row);
        llama_token token = sampling_choose(&sampling, logits, vocab_size, best);
        if (token < 0) return ERR_NO_MEMORY;
        decode_timing_add(&timing, &timing.pick);
        float max = logits[best];
        produced++;
        int end = llama_vocab_is_eog(vocab, token);
        int more = produced < limit && !end;
        if (more) {
            /* Queue the next token first: the log-softmax and the callback run while the GPU decodes. */
            prompt_tokens[0] = token;
            if (llama_decode(context, llama_batch_get_one(prompt_tokens, 1)) != 0) return decode_failed((int)produced);
            decode_timing_add(&timing, &timing.queue);
        }
        const float* all = logprobs_width == vocab_size ? row : scratch;
        float shift = max + logits_log_sum_exp(all, vocab_size, max);
        float chosen = all[token] - shift;
        for (int i = 0; i < logprobs_width; i++) row[i] -= shift;
        char text[256];
        EngineToken event = {
            .token_id = (uint32_t)token, .text = text, .text_len = end ? 0 : (size_t)piece(token, text, sizeof text),
            .logprob = chosen, .top_ids = logprobs_width == vocab_size ? NULL : (const uint32_t*)top_ids,
            .top_logprobs = row, .top_len = (size_t)logprobs_width,   /* top_k 0: the whole distribution, by id */
        };
        decode_timing_add(&timing, &timing.rest);
        int cancelled = on_token(user, &event) != 0;
        decode_timing_add(&timing, &timing.host);
        if (cancelled || end || !more) {
            if (timing.on) log_timing(&timing, produced);
            result->finish_reason = cancelled ? ENGINE_FINISH_CANCELLED : end ? ENGINE_FINISH_STOP : ENGINE_FINISH_LENGTH;
            return 0;
        }
        logits = llama_get_logits_ith(context, -1);   /* llama_decode only queues the work on a GPU: this waits for it */
        decode_timing_add(&timing, &timing.wait);
    }
}

/*
 * The model's own chat template (tokenizer.chat_template in the GGUF) applied by llama.cpp, which
 * knows the common templates by their marks rather than running Jinja. A model without one, or with
 * one llama.cpp does not know, answers ENGINE_CHAT_TEMPLATE_NONE and the host renders the chat.
 */
ENGINE_API int64_t engine_apply_chat_template(const EngineChatMessage* messages, size_t count, int32_t add_assistant,
                                              char* out, size_t out_size) {
    static int said_unknown;
    if (!model) return ERR_CONTEXT;
    const char* template = llama_model_chat_template(model, NULL);   /* NULL: the model has none */
    if (!template || count == 0) return ENGINE_CHAT_TEMPLATE_NONE;
    struct llama_chat_message* chat = malloc(count * sizeof *chat);
    if (!chat) return ERR_NO_MEMORY;
    for (size_t i = 0; i < count; i++) chat[i] = (struct llama_chat_message){messages[i].role, messages[i].content};
    int32_t room = out_size > INT32_MAX ? INT32_MAX : (int32_t)out_size;
    int32_t length = llama_chat_apply_template(template, chat, count, add_assistant != 0, out, room);
    free(chat);
    if (length < 0) {
        if (!said_unknown++) say(2, "llama: the model's chat template is not one llama.cpp knows; chats are rendered plainly");
        return ENGINE_CHAT_TEMPLATE_NONE;
    }
    if ((size_t)length < out_size) out[length] = 0;   /* llama.cpp copies with strncpy, which stops short of the NUL */
    return length;
}
#endif

void engine_shutdown(void) {
    if (context) llama_free(context);
    if (model) llama_model_free(model);   /* frees the weights' buffers: free_device for each */
    context = NULL;
    model = NULL;
    free(results);
    free(logprobs);
    free(prompt_tokens);
    free(scratch);
    free(top_ids);
    prompt_cache_free();
    sampling_free();
    scratch = NULL;
    top_ids = NULL;
    results = NULL;
    logprobs = NULL;
    prompt_tokens = NULL;
    prompt_capacity = 0;
    ggml_log_callback current;
    void* data;
    llama_log_get(&current, &data);
    if (current == on_llama_log) llama_log_set(NULL, NULL);   /* this copy of the code is about to go */
}
