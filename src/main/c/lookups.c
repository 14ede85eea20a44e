/*
 * lookups.c: symbol lookups, both the shim's own and the program's.
 */
#include "shim.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Lookups by handle ---------------------------------------------------------------------
 * LD_PRELOAD only wins lookups through the global scope. A program that loads the runtime itself
 * and asks it by handle (CuPy: dlopen("libcudart.so.13"), then dlsym(handle, "cudaMalloc")) would
 * bypass vmmkit. So vmmkit also answers dlsym: a lookup of an intercepted name that finds the
 * runtime's function returns vmmkit's instead, and the runtime's becomes the real one. Every other
 * lookup goes straight to libc's dlsym, as a tail call, so that RTLD_NEXT still means "after the
 * caller". dlvsym (a lookup with a version, as cuda-python's loaders do) is answered the same way.
 * Inside the shim, lookups use next_dlsym (through lookup), never the exported dlsym. */
typedef void *(*dlsym_fn)(void *, const char *);
typedef void *(*dlvsym_fn)(void *, const char *, const char *);
static dlsym_fn next_dlsym;
static dlvsym_fn next_dlvsym;
static pthread_once_t next_dlsym_once = PTHREAD_ONCE_INIT;

/* libc's own dlsym and dlvsym, found in libc's dynamic symbol table (GNU hash), because any call
 * by name from this library, dlvsym(RTLD_NEXT, ...) included, would land on vmmkit's exports. */
static uint32_t gnu_hash(const char *name) {
    uint32_t h = 5381;
    for (const unsigned char *c = (const unsigned char *) name; *c; c++) h = h * 33 + *c;
    return h;
}

struct libc_symbol { const char *name; void *address; };

static int find_in_libc(struct dl_phdr_info *info, size_t size, void *data) {
    (void) size;
    struct libc_symbol *want = data;
    if (!info->dlpi_name || !strstr(info->dlpi_name, "/libc.so")) return 0;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *) (info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    }
    const ElfW(Sym) *symbols = NULL;
    const char *strings = NULL;
    const uint32_t *hash = NULL;
    for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
        /* ld.so rewrites these to absolute addresses on x86-64; add the base if it did not. */
        ElfW(Addr) at = dyn->d_un.d_ptr < info->dlpi_addr ? info->dlpi_addr + dyn->d_un.d_ptr : dyn->d_un.d_ptr;
        if (dyn->d_tag == DT_SYMTAB) symbols = (const ElfW(Sym) *) at;
        else if (dyn->d_tag == DT_STRTAB) strings = (const char *) at;
        else if (dyn->d_tag == DT_GNU_HASH) hash = (const uint32_t *) at;
    }
    if (!symbols || !strings || !hash) return 1;
    uint32_t buckets = hash[0], first = hash[1], bloom_words = hash[2];
    const uint32_t *bucket = (const uint32_t *) ((const ElfW(Addr) *) (hash + 4) + bloom_words);
    const uint32_t *chain = bucket + buckets;
    uint32_t h = gnu_hash(want->name);
    for (uint32_t i = bucket[h % buckets]; i >= first; i++) {
        uint32_t hi = chain[i - first];
        if ((hi | 1) == (h | 1) && symbols[i].st_value != 0 && strcmp(strings + symbols[i].st_name, want->name) == 0) {
            want->address = (void *) (info->dlpi_addr + symbols[i].st_value);
            return 1;
        }
        if (hi & 1) break;
    }
    return 1;
}

static void *libc_function(const char *name) {
    struct libc_symbol want = { name, NULL };
    dl_iterate_phdr(find_in_libc, &want);
    return want.address;
}

static int log_lookups; /* VMM_LOG=debug: each lookup of a cu* name by handle is printed */

static void find_next_dlsym(void) {
    next_dlsym = (dlsym_fn) libc_function("dlsym");
    next_dlvsym = (dlvsym_fn) libc_function("dlvsym");
    const char *level = getenv("VMM_LOG");
    log_lookups = level && strcmp(level, "debug") == 0;
}

void *lookup(void *handle, const char *name) {
    pthread_once(&next_dlsym_once, find_next_dlsym);
    return next_dlsym ? next_dlsym(handle, name) : NULL;
}

/* True when code at address belongs to the JVM (libjvm.so, or the JDK's libjava.so). */
static int called_from_jvm(void *address) {
    Dl_info where;
    if (!dladdr(address, &where) || !where.dli_fname) return 0;
    const char *file = strrchr(where.dli_fname, '/');
    file = file ? file + 1 : where.dli_fname;
    return strcmp(file, "libjvm.so") == 0 || strcmp(file, "libjava.so") == 0;
}

/* ---- dlsym ------------------------------------------------------------------------------- */

void *substitute(void **real_slot, void *runtime_fn, void *ours) {
    if (runtime_fn == ours) return ours;
    void *expected = NULL;
    __atomic_compare_exchange_n(real_slot, &expected, runtime_fn, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
    return ours;
}

/* vmmkit's function for a name the library's own function was found under, else that function.
 * The JVM's own lookups (vmmkit's driver binding libcuda through FFM) always get the library's
 * function: vmmkit's calls to the driver must never come back into the shim. */
static void *intercepted(const char *name, void *library_fn, void *caller) {
    if (called_from_jvm(caller)) return library_fn;
    void *ours = runtime_api_substitute(name, library_fn);
    if (!ours) ours = stream_capture_substitute(name, library_fn);
    if (!ours) ours = driver_api_substitute(name, library_fn);
    return ours ? ours : library_fn;
}

/* Names vmmkit may answer: the runtime's cuda* and the driver's cu* functions. */
static int may_intercept(const char *name) {
    return name && name[0] == 'c' && name[1] == 'u';
}

EXPORT void *dlsym(void *handle, const char *name) {
    pthread_once(&next_dlsym_once, find_next_dlsym);
    if (handle == RTLD_NEXT || handle == RTLD_DEFAULT || !may_intercept(name)) {
        return next_dlsym(handle, name); /* a tail call: libc sees the original caller */
    }
    void *fn = next_dlsym(handle, name);
    void *answer = fn ? intercepted(name, fn, __builtin_return_address(0)) : NULL;
    if (log_lookups) fprintf(stderr, "vmmkit: dlsym(%p, %s) -> %p%s\n", handle, name, answer, answer != fn ? " (vmmkit)" : "");
    return answer;
}

EXPORT void *dlvsym(void *handle, const char *name, const char *version) {
    pthread_once(&next_dlsym_once, find_next_dlsym);
    if (handle == RTLD_NEXT || handle == RTLD_DEFAULT || !may_intercept(name)) {
        return next_dlvsym(handle, name, version); /* a tail call: libc sees the original caller */
    }
    void *fn = next_dlvsym(handle, name, version);
    void *answer = fn ? intercepted(name, fn, __builtin_return_address(0)) : NULL;
    if (log_lookups) fprintf(stderr, "vmmkit: dlvsym(%p, %s, %s) -> %p%s\n", handle, name, version ? version : "", answer, answer != fn ? " (vmmkit)" : "");
    return answer;
}
