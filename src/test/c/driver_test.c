/*
 * driver_test.c: a CUDA program that allocates through the driver API, linked against the stand-in
 * driver (fake_cuda.c, libcuda.so.1), the stand-in runtime (fake_cudart.c) and a stand-in static
 * runtime (static_runtime.c), run under `vmmkit run` by DriverApiEndToEndTest. Each argument names
 * a scenario (`all`: every one). With VMM_MODE=monitor the program expects every allocation to
 * reach the stand-ins; otherwise (vmm) it expects none to. Prints "ok <scenario>" for each, and
 * exits 1 at the first failure.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUstream;
typedef struct { char reserved[64]; } CUipcMemHandle;
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemAllocAsync(CUdeviceptr *, size_t, CUstream);
CUresult cuMemFreeAsync(CUdeviceptr, CUstream);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *, size_t, CUstream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr, CUstream);
CUresult cuMemAllocPitch_v2(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *, size_t, void *, CUstream);
CUresult cuDeviceGetDefaultMemPool(void **, int);
CUresult cuMemGetAddressRange_v2(CUdeviceptr *, size_t *, CUdeviceptr);
CUresult cuPointerGetAttribute(void *, int, CUdeviceptr);
CUresult cuPointerGetAttributes(unsigned int, int *, void **, CUdeviceptr);
CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void *, size_t);
CUresult cuMemcpyDtoH_v2(void *, CUdeviceptr, size_t);
CUresult cuIpcGetMemHandle(CUipcMemHandle *, CUdeviceptr);
CUresult cuIpcCloseMemHandle(CUdeviceptr);
CUresult cuStreamBeginCapture_v2(CUstream, int);
CUresult cuStreamEndCapture(CUstream, void **);
CUresult cuGetProcAddress(const char *, void **, int, unsigned long long);
CUresult cuGetProcAddress_v2(const char *, void **, int, unsigned long long, int *);
long fake_cuda_alloc_calls(void);
long fake_cuda_free_calls(void);
long fake_cuda_ipc_calls(void);
void *fake_cuda_own_mem_alloc(void);
void fake_cuda_drop_context(void);
typedef struct { size_t width, height, depth; } cudaExtent;
typedef struct { void *ptr; size_t pitch, xsize, ysize; } cudaPitchedPtr;
int cudaMallocPitch(void **, size_t *, size_t, size_t);
int cudaMalloc3D(cudaPitchedPtr *, cudaExtent);
int cudaFree(void *);
int cudaGetDriverEntryPoint(const char *, void **, unsigned long long, int *);
int cudaGetDriverEntryPointByVersion(const char *, void **, unsigned int, unsigned long long, int *);
long fake_cudart_malloc_calls(void);
int static_runtime_init(void);
int static_runtime_malloc(void **, size_t);
int static_runtime_free(void *);
int static_runtime_copy_in(void *, const void *, size_t);
int static_runtime_copy_out(void *, const void *, size_t);

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);
typedef CUresult (*alloc_async_fn)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*free_async_fn)(CUdeviceptr, CUstream);

enum { RANGE_START_ADDR = 11, RANGE_SIZE = 12, MEMORY_TYPE = 2, PER_THREAD = 2 };

static int monitor;
static const char *scenario = "";

#define CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "FAIL %s: %s (driver_test.c:%d)\n", scenario, #cond, __LINE__); exit(1); } } while (0)

/* Allocations expected to reach the stand-in for n requests: all in monitor mode, none in vmm. */
static long expected(long n) { return monitor ? n : 0; }

/* Writes a pattern through the driver's copy, reads it back: the memory holds data. */
static void holds_data(CUdeviceptr p, size_t n, unsigned seed) {
    unsigned char *in = malloc(n), *out = calloc(n, 1);
    CHECK(in && out);
    for (size_t i = 0; i < n; i++) in[i] = (unsigned char) (seed * 31 + i * 7);
    CHECK(cuMemcpyHtoD_v2(p, in, n) == 0 && cuMemcpyDtoH_v2(out, p, n) == 0);
    CHECK(memcmp(in, out, n) == 0);
    free(in);
    free(out);
}

/* Allocates, fills and frees sizes from 1 byte to 64 MiB through the given pair. */
static void pairs(alloc_fn a, free_fn f) {
    static const size_t sizes[] = {1, 255, 4096, 1 << 20, (3 << 20) + 5, 64 << 20};
    long before = fake_cuda_alloc_calls();
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        CUdeviceptr p = 0, q = 0;
        CHECK(a(&p, sizes[i]) == 0 && p && a(&q, sizes[i]) == 0 && q && p != q);
        holds_data(p, sizes[i], i);
        holds_data(q, sizes[i], i + 50);
        CHECK(f(p) == 0 && f(q) == 0);
    }
    CHECK(fake_cuda_alloc_calls() - before == expected(12));
}

static void async_pairs(alloc_async_fn a, free_async_fn f, CUstream stream) {
    long before = fake_cuda_alloc_calls();
    CUdeviceptr p[8];
    for (int i = 0; i < 8; i++) CHECK(a(&p[i], (size_t) 1000 << i, stream) == 0 && p[i]);
    for (int i = 0; i < 8; i++) holds_data(p[i], (size_t) 1000 << i, i);
    for (int i = 0; i < 8; i++) CHECK(f(p[i], stream) == 0);
    CHECK(fake_cuda_alloc_calls() - before == expected(8));
}

static void direct(void) { pairs(cuMemAlloc_v2, cuMemFree_v2); }

static void stream_ordered(void) {
    async_pairs(cuMemAllocAsync, cuMemFreeAsync, (CUstream) 0x5700);
    async_pairs(cuMemAllocAsync, cuMemFreeAsync, NULL);
    async_pairs(cuMemAllocAsync_ptsz, cuMemFreeAsync_ptsz, NULL);
    async_pairs(cuMemAllocAsync_ptsz, cuMemFreeAsync_ptsz, (CUstream) 0x5800);
}

/* Every way to ask for the functions by name: both entry points, versions, flags. */
static void proc_address(void) {
    static const int versions[] = {3020, 11020, 12000, 12080, 13000};
    for (unsigned v = 0; v < sizeof versions / sizeof versions[0]; v++) {
        for (unsigned long long flags = 0; flags <= PER_THREAD; flags++) {
            void *a = NULL, *f = NULL;
            int status = -1;
            CHECK(cuGetProcAddress_v2("cuMemAlloc", &a, versions[v], flags, &status) == 0 && status == 0 && a);
            CHECK(cuGetProcAddress("cuMemFree", &f, versions[v], flags) == 0 && f);
            CHECK(a != fake_cuda_own_mem_alloc() || monitor);
            pairs((alloc_fn) a, (free_fn) f);
            if (versions[v] < 11020) continue;
            void *aa = NULL, *fa = NULL;
            CHECK(cuGetProcAddress_v2("cuMemAllocAsync", &aa, versions[v], flags, &status) == 0 && aa);
            CHECK(cuGetProcAddress_v2("cuMemFreeAsync", &fa, versions[v], flags, &status) == 0 && fa);
            async_pairs((alloc_async_fn) aa, (free_async_fn) fa, NULL);
        }
    }
    /* cuGetProcAddress itself, asked by name, is vmmkit's too: what it answers is served. */
    void *get = NULL, *a = NULL, *f = NULL;
    int status;
    CHECK(cuGetProcAddress_v2("cuGetProcAddress", &get, 12080, 0, &status) == 0 && get);
    CHECK(((CUresult (*)(const char *, void **, int, unsigned long long, int *)) get)("cuMemAlloc", &a, 12080, 0, &status) == 0);
    CHECK(cuGetProcAddress_v2("cuMemFree", &f, 12080, 0, &status) == 0);
    pairs((alloc_fn) a, (free_fn) f);
    /* A name the driver does not know stays unknown. */
    CHECK(cuGetProcAddress_v2("cuNoSuchFunction", &a, 12080, 0, &status) != 0);
}

/* dlopen + dlsym by handle, as CuPy and cuda-python load the driver. */
static void by_handle(void) {
    void *libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    CHECK(libcuda);
    pairs((alloc_fn) dlsym(libcuda, "cuMemAlloc_v2"), (free_fn) dlsym(libcuda, "cuMemFree_v2"));
    async_pairs((alloc_async_fn) dlsym(libcuda, "cuMemAllocAsync"), (free_async_fn) dlsym(libcuda, "cuMemFreeAsync"), NULL);
}

/* Through the runtime's entry-point queries. */
static void runtime_entry_points(void) {
    void *a = NULL, *f = NULL;
    int status;
    CHECK(cudaGetDriverEntryPoint("cuMemAlloc", &a, 0, &status) == 0 && a);
    CHECK(cudaGetDriverEntryPoint("cuMemFree", &f, 0, &status) == 0 && f);
    pairs((alloc_fn) a, (free_fn) f);
    CHECK(cudaGetDriverEntryPointByVersion("cuMemAlloc", &a, 12080, 0, &status) == 0 && a);
    CHECK(cudaGetDriverEntryPointByVersion("cuMemFree", &f, 12080, 0, &status) == 0 && f);
    pairs((alloc_fn) a, (free_fn) f);
}

static void static_runtime(void) {
    CHECK(static_runtime_init() == 0);
    long before = fake_cuda_alloc_calls();
    void *p = NULL;
    char in[4096], out[4096];
    for (unsigned i = 0; i < sizeof in; i++) in[i] = (char) (i * 13);
    for (int i = 0; i < 12; i++) {
        CHECK(static_runtime_malloc(&p, (size_t) 4096 << i) == 0 && p);
        CHECK(static_runtime_copy_in(p, in, sizeof in) == 0 && static_runtime_copy_out(out, p, sizeof out) == 0);
        CHECK(memcmp(in, out, sizeof in) == 0 && static_runtime_free(p) == 0);
    }
    CHECK(fake_cuda_alloc_calls() - before == expected(12));
}

/* cuMemGetAddressRange and the range attributes on interior pointers answer with the allocation. */
static void ranges(void) {
    static const size_t sizes[] = {100, 4096, (5 << 20) + 3};
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        CUdeviceptr p = 0, base = 0, start = 0;
        size_t size = 0, length = 0;
        unsigned int type = 0;
        CHECK(cuMemAlloc_v2(&p, sizes[i]) == 0);
        CUdeviceptr probes[] = {p, p + 1, p + sizes[i] / 2, p + sizes[i] - 1};
        for (int k = 0; k < 4; k++) {
            CHECK(cuMemGetAddressRange_v2(&base, &size, probes[k]) == 0 && base == p && size == sizes[i]);
            CHECK(cuMemGetAddressRange_v2(NULL, &size, probes[k]) == 0 && size == sizes[i]);
            CHECK(cuPointerGetAttribute(&start, RANGE_START_ADDR, probes[k]) == 0 && start == p);
            CHECK(cuPointerGetAttribute(&length, RANGE_SIZE, probes[k]) == 0 && length == sizes[i]);
            int kinds[] = {MEMORY_TYPE, RANGE_START_ADDR, RANGE_SIZE};
            void *data[] = {&type, &start, &length};
            start = length = 0;
            CHECK(cuPointerGetAttributes(3, kinds, data, probes[k]) == 0);
            CHECK(type == 2 && start == p && length == sizes[i]);
            type = 0;
            CHECK(cuPointerGetAttributes(1, kinds, data, probes[k]) == 0 && type == 2);   /* the type alone */
            length = 0;
            CHECK(cuPointerGetAttributes(1, kinds + 2, data + 2, probes[k]) == 0 && length == sizes[i]);   /* the size alone */
        }
        CHECK(cuMemFree_v2(p) == 0);
    }
}

/* Pitched allocations: the driver's and the runtime's, rows of the pitch CUDA gives. */
static void pitched(void) {
    long before = fake_cuda_alloc_calls() + fake_cudart_malloc_calls();
    CUdeviceptr p = 0;
    size_t pitch = 0;
    CHECK(cuMemAllocPitch_v2(&p, &pitch, 1000, 30, 4) == 0 && pitch == 1024);
    holds_data(p, pitch * 30, 3);
    CHECK(cuMemFree_v2(p) == 0);
    CHECK(cuMemAllocPitch_v2(&p, &pitch, 1000, 30, 3) == 1); /* element sizes are 4, 8 or 16 */
    void *q = NULL;
    CHECK(cudaMallocPitch(&q, &pitch, 513, 7) == 0 && q && pitch == 1024);
    holds_data((CUdeviceptr) (uintptr_t) q, pitch * 7, 4);
    CHECK(cudaFree(q) == 0);
    cudaPitchedPtr volume;
    CHECK(cudaMalloc3D(&volume, (cudaExtent) {100, 4, 5}) == 0 && volume.ptr && volume.pitch == 512);
    CHECK(volume.xsize == 100 && volume.ysize == 4);
    holds_data((CUdeviceptr) (uintptr_t) volume.ptr, 512 * 4 * 5, 5);
    CHECK(cudaFree(volume.ptr) == 0);
    CHECK(fake_cuda_alloc_calls() + fake_cudart_malloc_calls() - before == expected(3));
}

/* Freeing what vmmkit did not hand out is an error; nothing it holds is touched. */
static void foreign(void) {
    CUdeviceptr keep = 0, p = 0;
    CHECK(cuMemAlloc_v2(&keep, 1 << 20) == 0);
    holds_data(keep, 1 << 20, 9);
    char host[64];
    CHECK(cuMemFree_v2((CUdeviceptr) (uintptr_t) host) == 1);   /* never allocated */
    CHECK(cuMemFree_v2(keep + 256) == 1);                      /* inside an allocation */
    CHECK(cuMemFreeAsync(keep + 4096, NULL) == 1);
    CHECK(cuMemAlloc_v2(&p, 1 << 20) == 0 && p != keep);
    holds_data(p, 1 << 20, 10);
    CHECK(cuMemFree_v2(p) == 0 && cuMemFree_v2(p) == 1);       /* a second free */
    unsigned char out[1 << 10];
    CHECK(cuMemcpyDtoH_v2(out, keep, sizeof out) == 0);
    for (unsigned i = 0; i < sizeof out; i++) CHECK(out[i] == (unsigned char) (9 * 31 + i * 7));
    CHECK(cuMemFree_v2(keep) == 0);
    CHECK(cuMemAlloc_v2(NULL, 16) == 1);
}

/* A pool of the program's own is CUDA's: passed through, in both modes. */
static void pool(void) {
    long before = fake_cuda_alloc_calls();
    CUdeviceptr p = 0;
    CHECK(cuMemAllocFromPoolAsync(&p, 4096, (void *) 0x1, NULL) == 0 && p);
    CHECK(fake_cuda_alloc_calls() - before == 1);
    CHECK(cuMemFreeAsync(p, NULL) == 0);
}

/* The device's default pool is cuMemAllocAsync's (XLA's cuda_async allocator asks it by name): vmmkit
 * serves it in vmm mode, and a second free of the same pointer is refused. */
static CUresult alloc_from_default_pool(CUdeviceptr *p, size_t size, CUstream stream) {
    void *pool = NULL;
    CHECK(cuDeviceGetDefaultMemPool(&pool, 0) == 0 && pool);
    return cuMemAllocFromPoolAsync(p, size, pool, stream);
}

static void default_pool(void) {
    async_pairs(alloc_from_default_pool, cuMemFreeAsync, (CUstream) 0x7);
    CUdeviceptr p = 0;
    CHECK(alloc_from_default_pool(&p, 4096, NULL) == 0 && p);
    CHECK(cuMemFreeAsync(p, NULL) == 0);
    if (!monitor) CHECK(cuMemFreeAsync(p, NULL) == 1); /* the stand-in would free it twice without a word */
}

/* IPC of a vmmkit pointer is vmmkit's (its handle has the magic); the driver never sees it. */
static void ipc(void) {
    if (monitor) return;
    CUdeviceptr p = 0;
    CUipcMemHandle handle;
    long driver_calls = fake_cuda_ipc_calls();
    CHECK(cuMemAlloc_v2(&p, 1 << 20) == 0);
    CHECK(cuIpcGetMemHandle(&handle, p) == 0 && memcmp(handle.reserved, "VMMKIPC\1", 8) == 0);
    CHECK(fake_cuda_ipc_calls() == driver_calls);
    CHECK(cuIpcCloseMemHandle(p) == 1 && fake_cuda_ipc_calls() == driver_calls + 1); /* never opened */
    CHECK(cuMemFree_v2(p) == 0);
}

/* A thread with no current context gets the driver's own answer. */
static void no_context(void) {
    fake_cuda_drop_context();
    long before = fake_cuda_alloc_calls();
    CUdeviceptr p = 0;
    CHECK(cuMemAlloc_v2(&p, 4096) == 0 && cuMemFree_v2(p) == 0); /* the stand-in serves anyway */
    CHECK(fake_cuda_alloc_calls() - before == 1);
}

/*
 * A stream capture through the driver API (as XLA makes one), its functions asked for by name.
 * Under a 64 MiB device: memory freed before the capture is reused during it, memory freed during
 * it is refused (no device synchronisation may run), and reused after it; the exported symbols
 * count too.
 */
static void capture(void) {
    if (monitor) return;
    typedef CUresult (*begin_fn)(CUstream, int);
    typedef CUresult (*end_fn)(CUstream, void **);
    void *begin_by_name = NULL, *end_by_name = NULL, *graph = NULL;
    int status = 0;
    CHECK(cuGetProcAddress_v2("cuStreamBeginCapture", &begin_by_name, 12080, 0, &status) == 0 && begin_by_name);
    CHECK(cuGetProcAddress_v2("cuStreamEndCapture", &end_by_name, 12080, 0, &status) == 0 && end_by_name);
    begin_fn begin = (begin_fn) begin_by_name;
    end_fn end = (end_fn) end_by_name;
    size_t big = (size_t) 40 << 20;
    CUstream stream = (CUstream) 0x5200;
    for (int round = 0; round < 2; round++) {   /* by name, then the exported symbols */
        if (round == 1) { begin = cuStreamBeginCapture_v2; end = cuStreamEndCapture; }
        CUdeviceptr a = 0, b = 0, c = 0;
        CHECK(cuMemAlloc_v2(&a, big) == 0 && cuMemFree_v2(a) == 0);
        CHECK(begin(stream, 0) == 0);
        CHECK(cuMemAlloc_v2(&b, big) == 0);
        CHECK(cuMemFree_v2(b) == 0);
        CHECK(cuMemAlloc_v2(&c, big) == 2);   /* CUDA_ERROR_OUT_OF_MEMORY */
        CHECK(end(stream, &graph) == 0 && graph);
        CHECK(end(stream, &graph) != 0);       /* nothing capturing: the driver's error, nothing counted */
        CHECK(cuMemAlloc_v2(&c, big) == 0 && cuMemFree_v2(c) == 0);
    }
    CHECK(fake_cuda_alloc_calls() == 0);

    /* Stream-ordered calls on the capturing stream are the graph's: the driver's; a vmmkit block
     * freed there is not reused during the capture; other streams stay vmmkit's. */
    CUstream other = (CUstream) 0x5201;
    CUdeviceptr kept = 0, graphs = 0, pooled = 0, beside = 0, c = 0;
    void *pool = NULL;
    CHECK(cuDeviceGetDefaultMemPool(&pool, 0) == 0);
    CHECK(cuMemAlloc_v2(&kept, big) == 0);
    long frees = fake_cuda_free_calls();
    CHECK(begin(stream, 0) == 0);
    CHECK(cuMemAllocAsync(&graphs, 4096, stream) == 0 && fake_cuda_alloc_calls() == 1);
    CHECK(cuMemAllocFromPoolAsync(&pooled, 4096, pool, stream) == 0 && fake_cuda_alloc_calls() == 2);
    CHECK(cuMemFreeAsync(graphs, stream) == 0 && cuMemFreeAsync(pooled, stream) == 0);
    CHECK(fake_cuda_free_calls() == frees + 2);
    CHECK(cuMemAllocAsync(&beside, 4096, other) == 0 && fake_cuda_alloc_calls() == 2);
    CHECK(cuMemFreeAsync(kept, stream) == 0 && fake_cuda_free_calls() == frees + 2);
    CHECK(cuMemAllocAsync(&c, big, other) == 2);   /* CUDA_ERROR_OUT_OF_MEMORY */
    CHECK(end(stream, &graph) == 0);
    CHECK(cuMemAllocAsync(&c, big, other) == 0 && c == kept);
    CHECK(cuMemFreeAsync(c, other) == 0 && cuMemFreeAsync(beside, other) == 0);
    CHECK(fake_cuda_alloc_calls() == 2);
}

static const struct { const char *name; void (*run)(void); } scenarios[] = {
    {"direct", direct}, {"stream_ordered", stream_ordered}, {"proc_address", proc_address},
    {"by_handle", by_handle}, {"runtime_entry_points", runtime_entry_points}, {"static_runtime", static_runtime},
    {"ranges", ranges}, {"pitched", pitched}, {"foreign", foreign}, {"pool", pool}, {"default_pool", default_pool}, {"ipc", ipc},
    {"no_context", no_context}, {"capture", capture},
};

int main(int argc, char **argv) {
    const char *mode = getenv("VMM_MODE");
    monitor = mode && strcmp(mode, "monitor") == 0;
    int count = (int) (sizeof scenarios / sizeof scenarios[0]);
    for (int a = 1; a < argc; a++) {
        int found = 0;
        for (int i = 0; i < count; i++) {
            int all = strcmp(argv[a], "all") == 0 && strcmp(scenarios[i].name, "capture") != 0; /* it needs a small device */
            if (!all && strcmp(argv[a], scenarios[i].name) != 0) continue;
            scenario = scenarios[i].name;
            scenarios[i].run();
            printf("ok %s\n", scenario);
            fflush(stdout);
            found = 1;
        }
        if (!found) { fprintf(stderr, "unknown scenario %s\n", argv[a]); return 2; }
    }
    return 0;
}
