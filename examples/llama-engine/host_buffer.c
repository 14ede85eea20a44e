/*
 * The buffer type of host_buffer.h. ggml's buffer interfaces are in ggml-backend-impl.h, from the
 * same llama.cpp source as the libraries. Tensors are plain host memory (is_host), so ggml's CPU
 * backend computes on them directly.
 */
#include "host_buffer.h"

#include "ggml-backend-impl.h"

#include <string.h>

#define ALIGNMENT 64   /* what ggml's CPU buffers use (TENSOR_ALIGNMENT) */

static const EngineConfig* owner;
static int ran_out;
static struct ggml_backend_buffer_type buffer_type;

static void free_buffer(ggml_backend_buffer_t buffer) {
    owner->free_device(owner->ctx, buffer->context);
}

static void* base(ggml_backend_buffer_t buffer) {
    return buffer->context;
}

static void memset_tensor(ggml_backend_buffer_t buffer, struct ggml_tensor* tensor, uint8_t value, size_t offset, size_t size) {
    (void)buffer;
    memset((char*)tensor->data + offset, value, size);
}

static void set_tensor(ggml_backend_buffer_t buffer, struct ggml_tensor* tensor, const void* data, size_t offset, size_t size) {
    (void)buffer;
    memcpy((char*)tensor->data + offset, data, size);
}

static void get_tensor(ggml_backend_buffer_t buffer, const struct ggml_tensor* tensor, void* data, size_t offset, size_t size) {
    (void)buffer;
    memcpy(data, (const char*)tensor->data + offset, size);
}

static bool cpy_tensor(ggml_backend_buffer_t buffer, const struct ggml_tensor* src, struct ggml_tensor* dst) {
    (void)buffer;
    if (!ggml_backend_buffer_is_host(src->buffer)) return false;
    memcpy(dst->data, src->data, ggml_nbytes(src));
    return true;
}

static void clear(ggml_backend_buffer_t buffer, uint8_t value) {
    memset(buffer->context, value, buffer->size);
}

static const struct ggml_backend_buffer_i buffer_functions = {
    .free_buffer = free_buffer,
    .get_base = base,
    .memset_tensor = memset_tensor,
    .set_tensor = set_tensor,
    .get_tensor = get_tensor,
    .cpy_tensor = cpy_tensor,
    .clear = clear,
};

static const char* name(ggml_backend_buffer_type_t type) {
    (void)type;
    return "vmmkit";
}

static ggml_backend_buffer_t alloc_buffer(ggml_backend_buffer_type_t type, size_t size) {
    void* memory = owner->alloc_device(owner->ctx, size ? size : ALIGNMENT);
    if (!memory) {
        ran_out = 1;
        return NULL;
    }
    return ggml_backend_buffer_init(type, buffer_functions, memory, size);
}

static size_t alignment(ggml_backend_buffer_type_t type) {
    (void)type;
    return ALIGNMENT;
}

static bool is_host(ggml_backend_buffer_type_t type) {
    (void)type;
    return true;
}

ggml_backend_buffer_type_t host_buffer_type(const EngineConfig* host) {
    owner = host;
    buffer_type = (struct ggml_backend_buffer_type){
        .iface = {.get_name = name, .alloc_buffer = alloc_buffer, .get_alignment = alignment, .is_host = is_host},
        .device = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU),
        .context = NULL,
    };
    return &buffer_type;
}

int host_buffer_ran_out(void) {
    return ran_out;
}
