/*
 * engine_api.h: the C ABI between vmmkit's engine host (`vmmkit serve`) and an inference engine
 * plugin. ABI version 1. A plugin is a shared library that exports the five functions below,
 * installed as engines/{engine_id}/{gpu_backend}/ with a manifest.json beside it.
 * This header is all a plugin needs; it does not depend on vmmkit's sources.
 *
 * Contract (ABI version 1):
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
 */
#ifndef VMMKIT_ENGINE_API_H
#define VMMKIT_ENGINE_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ENGINE_ABI_VERSION 1

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

ENGINE_API EngineInfo* engine_get_info(void);
ENGINE_API int  engine_init(EngineConfig* config);                 /* 0 = ok */
ENGINE_API int  engine_load_model(const char* model_path);         /* 0 = ok */
ENGINE_API int  engine_generate(const char* prompt, TokenResult** results);  /* >= 0: count of results; < 0: error */
ENGINE_API void engine_shutdown(void);

#ifdef __cplusplus
}
#endif

#endif /* VMMKIT_ENGINE_API_H */
