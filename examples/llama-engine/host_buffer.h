/*
 * A ggml buffer type whose memory comes from the engine host's alloc_device, for a host with no
 * CUDA device (EngineConfig.device == -1: that memory is host-addressable). The model's weights are
 * placed in it, so they live in vmmkit's memory, counted per model and freed with it.
 */
#ifndef LLAMA_ENGINE_HOST_BUFFER_H
#define LLAMA_ENGINE_HOST_BUFFER_H

#include "vmmkit/engine_api.h"
#include "ggml-backend.h"

/* The buffer type over host->alloc_device; host must outlive every buffer made from it. */
ggml_backend_buffer_type_t host_buffer_type(const EngineConfig* host);

/* Whether the last allocation failed because alloc_device returned NULL (the host is out of memory). */
int host_buffer_ran_out(void);

#endif
