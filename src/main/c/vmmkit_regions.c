/*
 * vmmkit_regions.c: memory tags, exported by the shim (declared in include/vmmkit/vmmkit.h).
 *
 * A thread's allocations between vmmkit_region_begin(tag, keep_contents) and vmmkit_region_end()
 * carry the tag (those outside every region the default tag, vmmkit_default_tag); vmmkit_pause(tag) gives the tag's device memory back and keeps its addresses
 * reserved, vmmkit_resume(tag) brings it back at the same addresses (with its bytes when the tag
 * keeps its contents). The work is Java's (dev.vmmkit.interpose.TagCalls); this file only checks
 * the arguments and translates. When vmmkit serves no allocation (monitor mode, a JVM that did not
 * start), a region could not take effect: the calls say so with cudaErrorNotSupported.
 */
#include <stdint.h>
#include <string.h>

#include "shim.h"

#define MAX_TAG_LENGTH 256 /* mirrored by dev.vmmkit.core.MemoryTagControl.MAX_TAG_NAME_LENGTH */

/* Errors come back from Java negated; 0 is success. */
static cudaError_t from_java(int32_t result) {
    return result == 0 ? cudaSuccess : (cudaError_t) -result;
}

/* The tag's length in bytes, or 0 when it is not a valid tag. Java gets the length, so that it copies
 * the name in one call instead of looking for its end byte by byte (slow in a first call, interpreted). */
static int32_t tag_length(const char *tag) {
    if (!tag) return 0;
    size_t length = strnlen(tag, MAX_TAG_LENGTH + 1);
    return length <= MAX_TAG_LENGTH ? (int32_t) length : 0;
}

/* NULL: a region of no tag (the default tag's allocations left out). */
EXPORT cudaError_t vmmkit_region_begin(const char *tag, int keep_contents) {
    int32_t length = tag_length(tag);
    if (tag && length == 0) return cudaErrorInvalidValue;
    if (!serving()) return cudaErrorNotSupported;
    return from_java(java.region_begin((int64_t) (intptr_t) tag, length, keep_contents != 0, current_device()));
}

/* NULL: no default tag from now on. */
EXPORT cudaError_t vmmkit_default_tag(const char *tag, int keep_contents) {
    int32_t length = tag_length(tag);
    if (tag && length == 0) return cudaErrorInvalidValue;
    if (!serving()) return cudaErrorNotSupported;
    return from_java(java.default_tag((int64_t) (intptr_t) tag, length, keep_contents != 0));
}

EXPORT cudaError_t vmmkit_region_end(void) {
    if (!serving()) return cudaErrorNotSupported;
    return from_java(java.region_end(current_device()));
}

EXPORT cudaError_t vmmkit_pause(const char *tag) {
    int32_t length = tag_length(tag);
    if (tag && length == 0) return cudaErrorInvalidValue;
    if (!serving()) return cudaErrorNotSupported;
    return from_java(java.pause((int64_t) (intptr_t) tag, length, current_device(), -1));
}

EXPORT cudaError_t vmmkit_pause_keeping(const char *tag, int keep_contents) {
    int32_t length = tag_length(tag);
    if (length == 0) return cudaErrorInvalidValue; /* the setting is each tag's: no NULL here */
    if (!serving()) return cudaErrorNotSupported;
    return from_java(java.pause((int64_t) (intptr_t) tag, length, current_device(), keep_contents != 0));
}

EXPORT cudaError_t vmmkit_host_memory(size_t *pinned_bytes, size_t *ready_bytes) {
    if (!pinned_bytes || !ready_bytes) return cudaErrorInvalidValue;
    if (!serving()) return cudaErrorNotSupported;
    int64_t out[2] = {0, 0};
    cudaError_t result = from_java(java.host_memory((int64_t) (intptr_t) out));
    *pinned_bytes = (size_t) out[0];
    *ready_bytes = (size_t) out[1];
    return result;
}

EXPORT cudaError_t vmmkit_release_cached(size_t *released_bytes) {
    if (!serving()) return cudaErrorNotSupported;
    int64_t released = 0;
    cudaError_t result = from_java(java.release_cached((int64_t) (intptr_t) &released));
    if (released_bytes) *released_bytes = (size_t) released;
    return result;
}

EXPORT cudaError_t vmmkit_resume(const char *tag) {
    int32_t length = tag_length(tag);
    if (tag && length == 0) return cudaErrorInvalidValue;
    if (!serving()) return cudaErrorNotSupported;
    return from_java(java.resume((int64_t) (intptr_t) tag, length, current_device()));
}
