/*
 * vmmkit.h: the functions vmmkit's shim (libvmmkit_preload.so) exports beside the CUDA runtime's.
 * They exist in a process that runs under `vmmkit run` or loaded the shim as PyTorch's pluggable
 * allocator (of all its memory, or of its memory tags' pools only); a program that may also run without vmmkit looks them up with dlsym(RTLD_DEFAULT, ...)
 * and treats a NULL as "vmmkit is not here".
 *
 * Include it after cuda_runtime.h; without CUDA's headers it declares cudaError_t as int, the
 * type CUDA's enum has in the ABI. Results are the CUDA runtime's error codes.
 */
#ifndef VMMKIT_VMMKIT_H
#define VMMKIT_VMMKIT_H

#include <stddef.h>

#if !defined(__DRIVER_TYPES_H__) && !defined(VMMKIT_CUDA_RUNTIME_SUBSET_H)
typedef int cudaError_t;
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*
 * realloc for device memory: the contents are kept up to the smaller size; the pointer stays the
 * same when the allocation shrinks or grows in place, and may change otherwise (the old one is then
 * freed as cudaFree frees).
 *   devPtr == NULL                    -> cudaErrorInvalidValue
 *   *devPtr == NULL                   -> as cudaMalloc(devPtr, size)
 *   size == 0                         -> cudaErrorInvalidValue, nothing changes (free with cudaFree)
 *   a pointer vmmkit did not hand out -> cudaErrorInvalidValue, nothing changes
 *   no memory for the new size        -> cudaErrorMemoryAllocation, the old allocation is unchanged
 */
cudaError_t vmmkit_realloc(void **devPtr, size_t size);

/*
 * Memory tags: give a group of allocations' device memory back and bring it again at the same
 * addresses, so pointers, tensors and captured CUDA graphs stay valid.
 *
 * vmmkit_region_begin: this thread's next allocations, on every device, carry `tag` (1-256 bytes,
 * NUL-terminated) until vmmkit_region_end; regions nest. A tag's allocations live in
 * address ranges and physical handles of their own. `keep_contents` is the tag's setting, shared
 * by its allocations from every region (the latest region opened sets it): when set, a pause
 * copies their bytes to pinned host memory and a resume copies them back; otherwise their
 * contents after a resume are undefined (the memory is usable).
 *
 * A NULL tag opens a region of no tag: the thread's allocations in it carry none, not even the
 * default tag (torch_memory_saver's disable()); tag regions opened inside it tag again.
 *
 * vmmkit_default_tag: from now on, allocations made outside every region, on every thread and
 * device, carry `tag` (NULL: none again), with `keep_contents` its setting as a region of it opened
 * now would set it. For a program that pauses everything it holds at once, as a trainer sharing
 * its GPUs with an inference engine does: allocations made on threads it does not control (the
 * gradients PyTorch's autograd makes on its device threads) are tagged too. Allocations made
 * before keep the tag they carry. The default tag is a tag like any other: paused, resumed and
 * opened in regions by its name; while it is paused, an allocation outside every region fails as
 * one into any paused tag does.
 *
 * vmmkit_pause: waits for the device's queued work, copies kept contents, unmaps and releases
 * every physical handle of the tag (its cached free memory included); the addresses stay
 * reserved. While paused, frees of the tag's pointers work, a new allocation into the tag fails
 * with cudaErrorMemoryAllocation (vmmkit says why on stderr), other memory is untouched.
 * Pausing a paused tag does nothing. NULL: every tag.
 *
 * vmmkit_resume: backs the tag's ranges with memory again (few, large handles), maps them, grants
 * access and copies kept contents back. Resuming a running tag does nothing. NULL: every tag.
 *
 * Errors: cudaErrorInvalidValue for a bad or unknown tag (an empty or over-long name), or
 * region_end with no region open;
 * cudaErrorMemoryAllocation when a resume found no device memory; cudaErrorUnknown for another
 * driver failure partway. After a failure the tag is consistent (each range mapped with its
 * contents, or released with its kept copy): call the same function again to finish, or the other
 * to go back. cudaErrorNotSupported when vmmkit serves no allocations in this process (monitor mode).
 * cudaErrorStreamCaptureUnsupported while a stream capture (a CUDA graph being recorded) is under
 * way on a device of the tag: a pause synchronises the device, which would invalidate the capture,
 * so nothing is done on that device (devices reached before it are done); call again after the
 * capture ends. A capture that begins during a pause or resume waits until it has returned.
 * vmmkit sees every capture where the shim is preloaded, as under `vmmkit run`. Loaded as PyTorch's
 * pluggable allocator it sees only the captures it is told of (vmmkit_capture_begin below); a
 * pause during any other capture invalidates it.
 *
 * vmmkit_host_memory: the pinned host memory vmmkit holds for tags now (ready for the next pause,
 * holding paused tags' contents, or under a copy) in *pinned_bytes, and the part ready for the next
 * pause in *ready_bytes. While a tag that keeps its contents is allocated, vmmkit pins host memory
 * for its first pause in the background (VMM_PIN_AHEAD: auto, off or a size): a program that wants
 * its first pause at full speed can wait until ready_bytes covers the tag.
 */
cudaError_t vmmkit_region_begin(const char *tag, int keep_contents);
cudaError_t vmmkit_region_end(void);
cudaError_t vmmkit_default_tag(const char *tag, int keep_contents);
cudaError_t vmmkit_pause(const char *tag);
/* vmmkit_pause of a named tag that first sets the tag's keep_contents on every device, for this pause
 * and the later ones, as a region of it opened now would (vLLM's sleep levels choose per sleep: 0
 * discards kept weights this time). cudaErrorInvalidValue for NULL or an unknown tag (nothing done). */
cudaError_t vmmkit_pause_keeping(const char *tag, int keep_contents);
cudaError_t vmmkit_resume(const char *tag);
cudaError_t vmmkit_host_memory(size_t *pinned_bytes, size_t *ready_bytes);

/*
 * vmmkit_release_cached: gives the device memory vmmkit caches for reuse (freed blocks' pages, on
 * every device, tags' included) back to the driver, after waiting for the device work that frees
 * still wait for; live allocations stay where they are. A cudaFree keeps its memory in vmmkit's
 * cache, so a program that frees its tensors for another process to use (PyTorch's empty_cache
 * before an inference engine wakes up) calls this after them. *released_bytes (when not NULL): the
 * bytes given back. cudaErrorNotSupported when vmmkit serves no allocations; cudaErrorUnknown when
 * the driver refused a release (what is not released stays cached, consistent).
 */
cudaError_t vmmkit_release_cached(size_t *released_bytes);

/*
 * Stream captures vmmkit cannot see. Preloaded (`vmmkit run`), the shim sees every capture begin
 * and end, and these are not needed. Loaded with dlopen, as PyTorch loads a pluggable allocator, it
 * sees none: a program that captures CUDA graphs there calls vmmkit_capture_begin just before it
 * begins a capture and vmmkit_capture_end once the capture has ended (successfully or not), from
 * any thread. Between them no pause or resume runs (they get cudaErrorStreamCaptureUnsupported)
 * and vmmkit synchronises no device; vmmkit_capture_begin waits for a pause, resume or
 * synchronisation in progress to return. Calls nest as a count: every begin needs its end. While
 * one is under way, stream-ordered allocations and frees on a capturing stream are left to CUDA, as
 * the graph's own (under `vmmkit run` too). cudaErrorNotSupported when vmmkit serves no allocations.
 * (python/vmmkit makes PyTorch's torch.cuda.CUDAGraph captures call these, where vmmkit is its
 * whole pluggable allocator and where it serves the tags' pools only.)
 */
cudaError_t vmmkit_capture_begin(void);
cudaError_t vmmkit_capture_end(void);

#ifdef __cplusplus
}
#endif

#endif
