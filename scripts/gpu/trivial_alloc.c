/*
 * trivial_alloc.c: the least a PyTorch pluggable allocator can do, to price PyTorch's pluggable path
 * itself apart from any allocator's work. Sizes are rounded up to 512 bytes; each rounded size has a
 * free list (a stack of pointers); a miss calls cudaMalloc, a free pushes the pointer on its size's
 * list. Memory is never given back. One stream is assumed (the benchmark's default stream), so a
 * freed pointer is reused at once, as stream-ordered allocators do on their own stream.
 * Build: gcc -O2 -shared -fPIC -o libtrivial_alloc.so trivial_alloc.c -ldl -lpthread
 * No CUDA headers or link: cudaMalloc is found in the process's loaded libcudart at first use.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

typedef int (*cuda_malloc_fn)(void **, size_t);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static cuda_malloc_fn cuda_malloc;
static long long allocs, frees, cuda_mallocs, reserved_bytes;

/* Open addressing: rounded size -> free list. */
#define SLOTS 65536
struct list { size_t size; void **items; size_t count, capacity; };
static struct list lists[SLOTS];

static int find_cudart(struct dl_phdr_info *info, size_t size, void *found) {
    (void) size;
    if (info->dlpi_name && strstr(info->dlpi_name, "libcudart.so")) {
        *(void **) found = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
        return *(void **) found != NULL;
    }
    return 0;
}

static cuda_malloc_fn resolve_cuda_malloc(void) {
    void *cudart = NULL;
    dl_iterate_phdr(find_cudart, &cudart);
    void *fn = cudart ? dlsym(cudart, "cudaMalloc") : NULL;
    if (!fn) fn = dlsym(RTLD_DEFAULT, "cudaMalloc");
    if (!fn) fprintf(stderr, "trivial_alloc: no cudaMalloc in this process\n");
    return (cuda_malloc_fn) fn;
}

static struct list *list_of(size_t size) {
    size_t i = (size / 512 * 0x9E3779B97F4A7C15ULL) >> 48; /* 16 bits */
    while (lists[i].size != 0 && lists[i].size != size) i = (i + 1) & (SLOTS - 1);
    lists[i].size = size;
    return &lists[i];
}

void *trivial_alloc(ssize_t size, int device, void *stream) {
    (void) device; (void) stream;
    if (size <= 0) return NULL;
    size_t rounded = ((size_t) size + 511) & ~(size_t) 511;
    pthread_mutex_lock(&lock);
    allocs++;
    struct list *l = list_of(rounded);
    void *p = l->count ? l->items[--l->count] : NULL;
    if (!p) {
        if (!cuda_malloc) cuda_malloc = resolve_cuda_malloc();
        if (cuda_malloc && cuda_malloc(&p, rounded) == 0) {
            cuda_mallocs++;
            reserved_bytes += (long long) rounded;
        } else {
            p = NULL;
        }
    }
    pthread_mutex_unlock(&lock);
    return p;
}

void trivial_free(void *ptr, ssize_t size, int device, void *stream) {
    (void) device; (void) stream;
    if (!ptr || size <= 0) return;
    size_t rounded = ((size_t) size + 511) & ~(size_t) 511;
    pthread_mutex_lock(&lock);
    frees++;
    struct list *l = list_of(rounded);
    if (l->count == l->capacity) {
        size_t capacity = l->capacity ? 2 * l->capacity : 64;
        void **items = realloc(l->items, capacity * sizeof *items);
        if (!items) { pthread_mutex_unlock(&lock); return; } /* leaked: never happens in a benchmark */
        l->items = items;
        l->capacity = capacity;
    }
    l->items[l->count++] = ptr;
    pthread_mutex_unlock(&lock);
}

/* allocations, frees, cudaMalloc calls, bytes obtained from cudaMalloc */
void trivial_stats(long long *out) {
    pthread_mutex_lock(&lock);
    out[0] = allocs; out[1] = frees; out[2] = cuda_mallocs; out[3] = reserved_bytes;
    pthread_mutex_unlock(&lock);
}
