/*
 * engine_api.h: the C ABI between vmmkit's engine host (`vmmkit serve`) and an inference engine
 * plugin. ABI version 2 (streaming); the host still loads version 1 plugins. A plugin is a shared
 * library that exports the functions below, installed as engines/{engine_id}/{gpu_backend}/ with a
 * manifest.json beside it whose "abi_version" says which version it speaks.
 * This header is all a plugin needs; it does not depend on vmmkit's sources.
 *
 * Version 1 exports engine_get_info, engine_init, engine_load_model, engine_generate and
 * engine_shutdown (build with -DENGINE_ABI_VERSION=1 to get the version 1 header). Version 2
 * replaces engine_generate by engine_generate_stream (items 9 to 12 below) and may export
 * engine_apply_chat_template (item 13); everything else holds for both.
 *
 * Contract:
 *
 *  1. Order. The host calls engine_get_info() first, before anything else, and refuses the plugin
 *     (with an alert log line naming both versions) when abi_version is not ENGINE_ABI_VERSION or
 *     when engine_id, version or abi_version disagree with manifest.json. A missing function is a
 *     refusal too. Then: engine_init once, engine_load_model once, engine_generate any number of
 *     times, engine_shutdown once. engine_shutdown is called even when engine_init or
 *     engine_load_model failed, so it must cope with a half-initialised engine.
 *
 *  2. One instance per model. Each loaded model gets its own engine instance: the host loads a
 *     private copy of the binary for it, so global and static variables are per instance and a
 *     plugin needs no instance handle. Overwriting the installed binary never affects a running
 *     instance; the host reloads it (shadow loading) and switches requests to the new copy.
 *
 *  3. Threads. The host calls one engine instance from one thread at a time, unless its manifest
 *     says "concurrent": true; then engine_generate may run on several threads at once.
 *     Calls may come from different OS threads over time.
 *
 *  4. Results. The TokenResult array written to *results, and the logprobs arrays it points to,
 *     stay owned by the engine and are valid until the next call into that engine on the same
 *     thread. The host copies them out before it makes another call.
 *
 *  5. Device memory. alloc_device returns device memory from the host's allocator (vmmkit), which
 *     accounts it to this instance; it returns NULL when the device is out of memory (then fail
 *     engine_load_model with a negative code: the host evicts idle models and retries). Give
 *     memory back with free_device. Memory an engine took through alloc_device and did not give
 *     back by the end of engine_shutdown is freed by the host.
 *     Where that memory lives is config->device, whatever the plugin's backend: N >= 0 means CUDA
 *     device N (copy with cuMemcpyHtoD/DtoH or use it in kernels; never dereference it on the
 *     CPU); -1 means the host has no CUDA device and the memory is host-addressable (the host's
 *     emulation of a device).
 *
 *  6. Callbacks. The callbacks and ctx stay valid from engine_init until engine_shutdown returns.
 *     Pass config->ctx back as the first argument of every callback. Callbacks are thread-safe.
 *     Log levels: 0 debug, 1 info, 2 warn, 3 error.
 *
 *  7. Errors. engine_init and engine_load_model return 0 on success. engine_generate returns the
 *     number of results (>= 0) or a negative error code; the host answers HTTP 500 for an error
 *     and keeps serving. Never abort() or exit() the process: by default the host runs each
 *     instance in a worker process, where that ends the worker and fails the request in flight, but
 *     with --isolation in-process the plugin runs inside the host.
 *
 *  8. Strings passed in (model_path, prompt, options_json) are UTF-8, NUL-terminated and valid only
 *     during the call. options_json is the manifest's "options" object as JSON, or NULL.
 *
 * Version 2 (streaming):
 *
 *  9. engine_generate_stream(prompt, request_json, on_token, user, result) generates for one
 *     request. request_json is a JSON object of that request's options, every key optional:
 *     {"max_tokens": N, "temperature": T, "top_p": P, "seed": S, "stop": ["..."], "top_logprobs": K}.
 *     Keys the engine does not know are ignored; a missing key means the engine's default (the
 *     manifest's "options", then its own). The host checks the values before the call (max_tokens
 *     >= 0, top_logprobs 0..20, temperature 0..2, top_p 0..1).
 *
 * 10. The callback. The engine calls on_token(user, &token) once per generated token, in order, on
 *     the thread that called engine_generate_stream, before the call returns; never after it
 *     returned and never from another thread. A non-zero return asks the engine to stop: it makes
 *     no further call to on_token, ends the generation and returns with finish_reason
 *     ENGINE_FINISH_CANCELLED (the host returns non-zero when the client went away, a stop string
 *     was hit, or the request ran out of time). The engine must not call into the host's engine
 *     functions from on_token (no re-entrancy); the host's on_token never calls the engine either.
 *     The host's log/alloc_device/free_device callbacks may be called from on_token's caller as
 *     usual.
 *
 * 11. Memory. Everything EngineToken points to (text, top_ids, top_logprobs) is owned by the engine
 *     and only needs to live until on_token returns; the host copies what it keeps. text is the
 *     token's piece of output as UTF-8 bytes, text_len long, not NUL-terminated; a piece may end
 *     (and the next one begin) inside a multi-byte character: the host joins the bytes. result is
 *     the host's memory; the engine fills it before it returns.
 *
 * 12. The end. engine_generate_stream returns 0 with result->finish_reason ENGINE_FINISH_LENGTH
 *     (max_tokens reached), ENGINE_FINISH_STOP (end of sequence, or a stop string the engine
 *     handled) or ENGINE_FINISH_CANCELLED (on_token returned non-zero), and result->prompt_tokens
 *     (the prompt's token count); or a negative error code (ENGINE_FINISH_ERROR in result, tokens
 *     delivered so far stand). Stop strings are enforced by the host too, across pieces, so an
 *     engine may leave them to the host.
 *
 * 13. The chat template (optional; a version 2 plugin without it loads and serves as before).
 *     engine_apply_chat_template(messages, count, add_assistant, out, out_size) renders a chat as
 *     the loaded model's own prompt format, e.g. with llama.cpp's llama_chat_apply_template; with
 *     add_assistant non-zero the text ends where the assistant's reply begins. The host calls it for
 *     chat requests, after engine_load_model, under the same thread rules as engine_generate_stream
 *     (item 3), then passes the text as that request's prompt. messages[i].role is one of "system",
 *     "user", "assistant", "tool", "developer"; role and content are UTF-8, NUL-terminated, and
 *     like messages valid only during the call. out is the host's memory, out_size bytes, valid only
 *     during the call. The return value, as snprintf's:
 *       >= 0  the rendered text's length in bytes (no NUL counted). When it is less than out_size,
 *             the engine wrote the text and a NUL into out; otherwise out was too small, its bytes
 *             mean nothing, and the host calls again with out_size greater than that length (the
 *             same messages must give the same length);
 *       ENGINE_CHAT_TEMPLATE_NONE  the model has no template, or one the engine cannot apply: the
 *             host renders the chat in its own plain form (docs/engine.md) and generates from that;
 *       any other negative value  an error (the host answers HTTP 500 and keeps serving).
 *     The rendered text may contain the model's special tokens as text (e.g. "<|im_start|>"): the
 *     engine reads them back as those tokens when the prompt comes to engine_generate_stream.
 */
#ifndef VMMKIT_ENGINE_API_H
#define VMMKIT_ENGINE_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef ENGINE_ABI_VERSION
#define ENGINE_ABI_VERSION 2
#endif

#if defined(_WIN32)
#define ENGINE_API __declspec(dllexport)
#else
#define ENGINE_API __attribute__((visibility("default")))
#endif

typedef struct {
    uint32_t abi_version;   /* ENGINE_ABI_VERSION the plugin was built against */
    const char* engine_id;  /* must equal the manifest's "id" */
    const char* version;    /* must equal the manifest's "version" */
} EngineInfo;

typedef struct {
    void* ctx;                                          /* host context, passed back to every callback */
    int32_t device;                                     /* device ordinal to use, -1 for none */
    const char* options_json;                           /* the manifest's "options" as JSON, or NULL */
    void* (*alloc_device)(void* ctx, size_t size);      /* device memory from the host's allocator; NULL on failure */
    void  (*free_device)(void* ctx, void* ptr);
    void  (*log)(void* ctx, int32_t level, const char* message);  /* 0 debug, 1 info, 2 warn, 3 error */
} EngineConfig;

typedef struct {
    uint32_t token_id;
    float* logprobs;
    size_t logprobs_len;
} TokenResult;

/* Version 2: one generated token, as engine_generate_stream hands it to on_token. */
typedef struct {
    uint32_t token_id;
    const char* text;             /* the token's UTF-8 piece, text_len bytes, not NUL-terminated */
    size_t text_len;
    float logprob;                /* log-probability of this token (0 when the engine has none) */
    const uint32_t* top_ids;      /* the top_len most likely tokens at this step, best first; NULL when */
    const float* top_logprobs;    /* top_logprobs is the whole distribution indexed by token id; their log-probabilities */
    size_t top_len;
} EngineToken;

/* Returns 0 to go on, non-zero to stop the generation. */
typedef int (*EngineTokenCallback)(void* user, const EngineToken* token);

#define ENGINE_FINISH_LENGTH 0
#define ENGINE_FINISH_STOP 1
#define ENGINE_FINISH_CANCELLED 2
#define ENGINE_FINISH_ERROR 3

typedef struct {
    int32_t finish_reason;        /* ENGINE_FINISH_* */
    int32_t prompt_tokens;        /* tokens in the prompt, as the engine tokenised it */
} EngineGenerateResult;

/* Version 2, optional: one message of a chat, for engine_apply_chat_template. */
typedef struct {
    const char* role;             /* "system", "user", "assistant", "tool" or "developer" */
    const char* content;          /* UTF-8, NUL-terminated */
} EngineChatMessage;

/* engine_apply_chat_template's answer when the model has no template the engine can apply. */
#define ENGINE_CHAT_TEMPLATE_NONE (-1)

ENGINE_API EngineInfo* engine_get_info(void);
ENGINE_API int  engine_init(EngineConfig* config);                 /* 0 = ok */
ENGINE_API int  engine_load_model(const char* model_path);         /* 0 = ok */
#if ENGINE_ABI_VERSION == 1
ENGINE_API int  engine_generate(const char* prompt, TokenResult** results);  /* >= 0: count of results; < 0: error */
#else
ENGINE_API int  engine_generate_stream(const char* prompt, const char* request_json, EngineTokenCallback on_token,
                                       void* user, EngineGenerateResult* result);  /* 0 = ok; < 0: error */
/* Optional (item 13): >= 0 the text's length (written when < out_size); ENGINE_CHAT_TEMPLATE_NONE; < 0 error. */
ENGINE_API int64_t engine_apply_chat_template(const EngineChatMessage* messages, size_t count, int32_t add_assistant,
                                              char* out, size_t out_size);
#endif
ENGINE_API void engine_shutdown(void);

#ifdef __cplusplus
}
#endif

#endif /* VMMKIT_ENGINE_API_H */
