/*
 * alloc_test.c: a CUDA program, linked against the stand-in runtime (fake_cudart.c), run under
 * `vmmkit run` by InterposeEndToEndTest. Each argument names a scenario; `all` runs every scenario
 * except `oom` (which needs a small VMM_DEVICE_MEMORY) and the IPC ones (`ipc`, `ipc_errors`, which
 * need vmmkit's own allocator: the stand-in runtime has no IPC). `die` ends the program by SIGTERM,
 * `fail` by exit(3). With VMM_MODE=monitor the program expects
 * every allocation to reach the stand-in; otherwise (vmm) it expects none to.
 * Prints "ok <scenario>" for each, and exits 1 at the first failure.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_runtime_subset.h"
typedef struct { char reserved[64]; } cudaIpcMemHandle_t;
cudaError_t cudaDeviceEnablePeerAccess(int, unsigned int);
cudaError_t cudaDeviceDisablePeerAccess(int);
cudaError_t cudaMemcpyPeer(void *, int, const void *, int, size_t);
cudaError_t cudaMemcpyPeerAsync(void *, int, const void *, int, size_t, cudaStream_t);
cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *, void *);
cudaError_t cudaIpcOpenMemHandle(void **, cudaIpcMemHandle_t, unsigned int);
cudaError_t cudaIpcCloseMemHandle(void *);
cudaError_t cudaStreamBeginCapture(cudaStream_t, int);
cudaError_t cudaStreamEndCapture(cudaStream_t, void **);
long fake_cudart_ipc_calls(void);
long fake_cudart_malloc_calls(void);
long fake_cudart_free_calls(void);
void *fake_cudart_own_malloc(size_t);

static int monitor;
static const char *scenario = "";

#define CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "FAIL %s: %s (alloc_test.c:%d)\n", scenario, #cond, __LINE__); exit(1); } } while (0)

/* Allocations expected to reach the stand-in for `n` requests: all in monitor mode, none in vmm. */
static long expected_stand_in_calls(long n) { return monitor ? n : 0; }

static void fill(unsigned char *buf, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) buf[i] = (unsigned char) (seed * 31 + i * 7);
}

/* H2D into a, D2D a -> b, D2H from b: the data must come back unchanged. */
static void round_trip(void *a, void *b, size_t n, unsigned seed, cudaStream_t stream) {
    unsigned char *in = malloc(n), *out = malloc(n);
    CHECK(in && out);
    fill(in, n, seed);
    memset(out, 0, n);
    if (stream) {
        CHECK(cudaMemcpyAsync(a, in, n, H2D, stream) == 0);
        CHECK(cudaMemcpyAsync(b, a, n, D2D, stream) == 0);
        CHECK(cudaMemcpyAsync(out, b, n, DEFAULT_KIND, stream) == 0);
    } else {
        CHECK(cudaMemcpy(a, in, n, H2D) == 0);
        CHECK(cudaMemcpy(b, a, n, D2D) == 0);
        CHECK(cudaMemcpy(out, b, n, D2H) == 0);
    }
    CHECK(memcmp(in, out, n) == 0);
    free(in);
    free(out);
}

static void basic(void) {
    static const size_t sizes[] = {1, 7, 255, 256, 511, 512, 4096, 65537, 1 << 20, (3 << 20) + 5, 16 << 20};
    const int count = sizeof sizes / sizeof sizes[0];
    long before = fake_cudart_malloc_calls();
    for (int i = 0; i < count; i++) {
        void *a = NULL, *b = NULL;
        CHECK(cudaMalloc(&a, sizes[i]) == 0 && a);
        CHECK(cudaMalloc(&b, sizes[i]) == 0 && b && b != a);
        round_trip(a, b, sizes[i], i, NULL);
        CHECK(cudaFree(a) == 0);
        CHECK(cudaFree(b) == 0);
    }
    cudaStream_t stream = (cudaStream_t) 0x5700;
    for (int i = 0; i < count; i++) {
        void *a = NULL, *b = NULL;
        CHECK(cudaMallocAsync(&a, sizes[i], stream) == 0 && a);
        CHECK(cudaMallocAsync(&b, sizes[i], stream) == 0 && b);
        round_trip(a, b, sizes[i], i + 100, stream);
        CHECK(cudaFreeAsync(a, stream) == 0);
        CHECK(cudaFreeAsync(b, stream) == 0);
    }
    /* Many live at once: each keeps its own bytes (no overlap). */
    enum { LIVE = 200 };
    unsigned char *live[LIVE], mark[2];
    for (int i = 0; i < LIVE; i++) {
        size_t n = 1 + (size_t) i * 997;
        CHECK(cudaMalloc((void **) &live[i], n) == 0);
        mark[0] = (unsigned char) i; mark[1] = (unsigned char) ~i;
        CHECK(cudaMemcpy(live[i], &mark[0], 1, H2D) == 0);
        if (n > 1) CHECK(cudaMemcpy(live[i] + n - 1, &mark[1], 1, H2D) == 0);
    }
    for (int i = 0; i < LIVE; i++) {
        size_t n = 1 + (size_t) i * 997;
        CHECK(cudaMemcpy(&mark[0], live[i], 1, D2H) == 0 && mark[0] == (unsigned char) i);
        if (n > 1) CHECK(cudaMemcpy(&mark[1], live[i] + n - 1, 1, D2H) == 0 && mark[1] == (unsigned char) ~i);
        CHECK(cudaFree(live[i]) == 0);
    }
    CHECK(fake_cudart_malloc_calls() - before == expected_stand_in_calls(4L * count + LIVE));
}

static void errors(void) {
    void *p = (void *) 1;
    CHECK(cudaMalloc(&p, 0) == 0 && p == NULL);
    CHECK(cudaMalloc(NULL, 16) == 1);
    CHECK(cudaFree(NULL) == 0);
    CHECK(cudaMalloc(&p, SIZE_MAX) == 2);
    CHECK(cudaMalloc(&p, 4096) == 0);
    CHECK(cudaFree(p) == 0);
    CHECK(cudaFree(p) == 1); /* double free: the runtime's answer, invalid value */
}

static void devices(void) {
    long before = fake_cudart_malloc_calls();
    void *on1 = NULL, *on0 = NULL;
    CHECK(cudaSetDevice(1) == 0);
    CHECK(cudaMalloc(&on1, 1 << 16) == 0);
    CHECK(cudaSetDevice(0) == 0);
    CHECK(cudaMalloc(&on0, 1 << 16) == 0);
    round_trip(on1, on0, 1 << 16, 5, NULL);
    CHECK(cudaFree(on1) == 0); /* freed while device 0 is current */
    CHECK(cudaFree(on0) == 0);
    CHECK(fake_cudart_malloc_calls() - before == expected_stand_in_calls(2));
}

/* Peer access on two devices, and copies between them (peer copies and cudaMemcpyDefault). */
static void peer(void) {
    enum { N = (1 << 20) + 333 };
    void *on0 = NULL, *on1 = NULL;
    CHECK(cudaSetDevice(0) == 0 && cudaMalloc(&on0, N) == 0);
    CHECK(cudaSetDevice(1) == 0);
    CHECK(cudaDeviceEnablePeerAccess(1, 0) == 101);   /* a device is not its own peer */
    CHECK(cudaDeviceEnablePeerAccess(0, 0) == 0);     /* device 1 may now use device 0's memory */
    CHECK(cudaDeviceEnablePeerAccess(0, 0) == 704);   /* already enabled */
    CHECK(cudaMalloc(&on1, N) == 0);
    unsigned char *in = malloc(N), *out = malloc(N);
    CHECK(in && out);
    fill(in, N, 21);
    CHECK(cudaMemcpy(on0, in, N, H2D) == 0);
    CHECK(cudaMemcpyPeer(on1, 1, on0, 0, N) == 0);
    memset(out, 0, N);
    CHECK(cudaMemcpy(out, on1, N, D2H) == 0 && memcmp(in, out, N) == 0);
    fill(in, N, 22);
    CHECK(cudaMemcpy(on1, in, N, H2D) == 0);
    CHECK(cudaMemcpyPeerAsync(on0, 0, on1, 1, N, (cudaStream_t) 0x5700) == 0);
    CHECK(cudaMemcpy(out, on0, N, DEFAULT_KIND) == 0 && memcmp(in, out, N) == 0);
    CHECK(cudaDeviceDisablePeerAccess(0) == 0);
    CHECK(cudaDeviceDisablePeerAccess(0) == 705);     /* not enabled any more */
    CHECK(cudaFree(on1) == 0);
    CHECK(cudaSetDevice(0) == 0 && cudaFree(on0) == 0);
    free(in);
    free(out);
}

/* ---- IPC: this program exports, a second copy of it (exec'd, so it runs its own vmmkit) imports. */

static void fill_device(void *p, size_t n, unsigned seed) {
    unsigned char *buf = malloc(n);
    CHECK(buf);
    fill(buf, n, seed);
    CHECK(cudaMemcpy(p, buf, n, H2D) == 0);
    free(buf);
}

static int device_holds(const void *p, size_t n, unsigned seed) {
    unsigned char *buf = malloc(n), *want = malloc(n);
    CHECK(buf && want);
    fill(want, n, seed);
    int same = cudaMemcpy(buf, p, n, D2H) == 0 && memcmp(buf, want, n) == 0;
    free(buf);
    free(want);
    return same;
}

static void to_hex(const cudaIpcMemHandle_t *h, char *hex) {
    for (int i = 0; i < 64; i++) sprintf(hex + 2 * i, "%02x", (unsigned char) h->reserved[i]);
}

static void from_hex(const char *hex, cudaIpcMemHandle_t *h) {
    for (int i = 0; i < 64; i++) {
        unsigned byte = 0;
        sscanf(hex + 2 * i, "%2x", &byte);
        h->reserved[i] = (char) byte;
    }
}

enum { IPC_BYTES = (3 << 20) + 123, IPC_SEED = 77 };

/* The importer: opens on device 1, answers 'O' (bytes right) or 'F' to each request of its parent. */
static int ipc_child(const char *hex, int requests, int answers) {
    scenario = "ipc_child";
    cudaIpcMemHandle_t handle;
    from_hex(hex, &handle);
    void *p = NULL;
    CHECK(cudaSetDevice(1) == 0);
    CHECK(cudaIpcOpenMemHandle(&p, handle, 1 /* cudaIpcMemLazyEnablePeerAccess */) == 0 && p);
    char request = 0, answer = device_holds(p, IPC_BYTES, IPC_SEED) ? 'O' : 'F';
    CHECK(write(answers, &answer, 1) == 1);
    while (read(requests, &request, 1) == 1) {
        if (request == 'c') {
            answer = device_holds(p, IPC_BYTES, IPC_SEED) ? 'O' : 'F';
        } else {
            answer = cudaIpcCloseMemHandle(p) == 0 && cudaIpcCloseMemHandle(p) == 1 ? 'O' : 'F';
        }
        CHECK(write(answers, &answer, 1) == 1);
        if (request != 'c') break;
    }
    return 0;
}

static char ask(int requests, int answers, char request) {
    char answer = 0;
    if (request) CHECK(write(requests, &request, 1) == 1);
    CHECK(read(answers, &answer, 1) == 1);
    return answer;
}

static void ipc(void) {
    if (monitor) return;
    void *a = NULL;
    CHECK(cudaSetDevice(0) == 0 && cudaMalloc(&a, IPC_BYTES) == 0);
    fill_device(a, IPC_BYTES, IPC_SEED);
    cudaIpcMemHandle_t handle, again;
    long runtime_calls = fake_cudart_ipc_calls();
    CHECK(cudaIpcGetMemHandle(&handle, a) == 0);
    CHECK(cudaIpcGetMemHandle(&again, a) == 0 && memcmp(&handle, &again, sizeof handle) == 0);
    CHECK(memcmp(handle.reserved, "VMMKIPC\1", 8) == 0);
    CHECK(fake_cudart_ipc_calls() == runtime_calls); /* vmmkit's pointer: the runtime never saw it */

    int to_child[2], from_child[2];
    CHECK(pipe(to_child) == 0 && pipe(from_child) == 0);
    char hex[129], requests[16], answers[16];
    to_hex(&handle, hex);
    snprintf(requests, sizeof requests, "%d", to_child[0]);
    snprintf(answers, sizeof answers, "%d", from_child[1]);
    fflush(NULL);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        execl("/proc/self/exe", "alloc_test", "ipc_child", hex, requests, answers, (char *) NULL);
        _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    CHECK(ask(to_child[1], from_child[0], 0) == 'O');       /* the importer reads the bytes */
    CHECK(cudaFree(a) == 0);                                /* freed while the importer holds it */
    void *others[6];
    for (int i = 0; i < 6; i++) {
        CHECK(cudaMalloc(&others[i], IPC_BYTES) == 0);
        fill_device(others[i], IPC_BYTES, 300 + i);
    }
    CHECK(ask(to_child[1], from_child[0], 'c') == 'O');     /* its pages were not reused */
    CHECK(ask(to_child[1], from_child[0], 'x') == 'O');     /* close, then a second close fails */
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (int i = 0; i < 6; i++) CHECK(device_holds(others[i], IPC_BYTES, 300 + i) && cudaFree(others[i]) == 0);
    close(to_child[1]);
    close(from_child[0]);
}

static void ipc_errors(void) {
    if (monitor) return;
    cudaIpcMemHandle_t garbage, malformed, stale, dead;
    for (int i = 0; i < 64; i++) garbage.reserved[i] = (char) (i * 37 + 11);
    void *p = NULL;
    long runtime_calls = fake_cudart_ipc_calls();
    CHECK(cudaIpcOpenMemHandle(&p, garbage, 1) == 1);       /* not vmmkit's: the runtime's answer */
    CHECK(fake_cudart_ipc_calls() == runtime_calls + 1);
    memset(&malformed, 0, sizeof malformed);
    memcpy(malformed.reserved, "VMMKIPC\1", 8);
    CHECK(cudaIpcOpenMemHandle(&p, malformed, 1) == 1);     /* cudaErrorInvalidValue */

    void *a = NULL;
    CHECK(cudaMalloc(&a, 1 << 20) == 0);
    CHECK(cudaIpcGetMemHandle(&stale, a) == 0);
    CHECK(cudaIpcOpenMemHandle(&p, stale, 1) == 0 && p);    /* this process may open it too */
    CHECK(cudaIpcCloseMemHandle(p) == 0);
    dead = stale;
    fflush(NULL);
    pid_t gone = fork();
    if (gone == 0) _exit(0);
    CHECK(gone > 0 && waitpid(gone, NULL, 0) == gone);
    memcpy(dead.reserved + 8, &gone, sizeof gone);
    CHECK(cudaIpcOpenMemHandle(&p, dead, 1) == 400);        /* its process has ended */
    CHECK(cudaFree(a) == 0);
    CHECK(cudaIpcOpenMemHandle(&p, stale, 1) == 400);       /* freed: cudaErrorInvalidResourceHandle */
    CHECK(cudaIpcOpenMemHandle(NULL, stale, 1) == 1);
    runtime_calls = fake_cudart_ipc_calls();
    CHECK(cudaIpcCloseMemHandle(a) == 1);                   /* never opened: the runtime refuses it */
    void *own = fake_cudart_own_malloc(4096);
    cudaIpcMemHandle_t runtime_handle;
    CHECK(cudaIpcGetMemHandle(&runtime_handle, own) == 1);  /* not vmmkit's pointer: the runtime's call */
    CHECK(fake_cudart_ipc_calls() == runtime_calls + 2);
    CHECK(cudaFree(own) == 0);
}

static void foreign(void) {
    void *own = fake_cudart_own_malloc(1024), *own_async = fake_cudart_own_malloc(1024);
    long frees = fake_cudart_free_calls();
    CHECK(cudaFree(own) == 0);
    CHECK(cudaFreeAsync(own_async, (cudaStream_t) 0x5700) == 0);
    CHECK(fake_cudart_free_calls() - frees == 2);
}

/* A program that loads the runtime itself and asks it by handle, as CuPy does, bypasses the
 * global lookup that LD_PRELOAD wins: vmmkit must still serve it (through its dlsym). */
static void by_handle(void) {
    void *runtime = dlopen("libcudart.so", RTLD_NOW | RTLD_LOCAL);
    CHECK(runtime != NULL);
    cudaError_t (*malloc_fn)(void **, size_t) = (cudaError_t (*)(void **, size_t)) dlsym(runtime, "cudaMalloc");
    /* with a version, as cuda-python's loaders ask */
    cudaError_t (*free_fn)(void *) = (cudaError_t (*)(void *)) dlvsym(runtime, "cudaFree", "libcudart.so.13");
    CHECK(malloc_fn != NULL && free_fn != NULL);
    long before = fake_cudart_malloc_calls();
    void *a = NULL, *b = NULL;
    CHECK(malloc_fn(&a, 1 << 16) == 0 && malloc_fn(&b, 1 << 16) == 0);
    round_trip(a, b, 1 << 16, 5, NULL);
    CHECK(free_fn(a) == 0 && free_fn(b) == 0);
    CHECK(fake_cudart_malloc_calls() - before == expected_stand_in_calls(2));
    dlclose(runtime);
}

static void oom(void) {
    if (monitor) return;
    enum { MAX = 1 << 16 };
    static void *blocks[MAX];
    int n = 0;
    cudaError_t rc = 0;
    while (n < MAX && (rc = cudaMalloc(&blocks[n], 1 << 20)) == 0) n++;
    CHECK(n > 0 && n < MAX);
    CHECK(rc == 2);
    CHECK(cudaFree(blocks[--n]) == 0);
    CHECK(cudaMalloc(&blocks[n], 1 << 20) == 0);
    n++;
    void *huge = NULL;
    CHECK(cudaMalloc(&huge, (size_t) 1 << 39) == 2);
    while (n > 0) CHECK(cudaFree(blocks[--n]) == 0);
    CHECK(cudaMalloc(&huge, 1 << 20) == 0 && cudaFree(huge) == 0);
    CHECK(fake_cudart_malloc_calls() == 0);
}

/*
 * A stream capture (a CUDA graph being recorded; a device synchronisation meanwhile would invalidate
 * it). Under a 64 MiB device: memory freed before the capture is synchronised as it begins, so an
 * allocation during the capture reuses it; memory freed during the capture waits for its end, so an
 * allocation that needs it fails at once instead of blocking; after the end it is reused.
 */
static void capture(void) {
    if (monitor) return;
    size_t big = (size_t) 40 << 20;
    cudaStream_t stream = (cudaStream_t) 0x5100;
    void *a = NULL, *b = NULL, *c = NULL, *graph = NULL;
    CHECK(cudaMalloc(&a, big) == 0 && cudaFree(a) == 0);
    CHECK(cudaStreamBeginCapture(stream, 0) == 0);
    CHECK(cudaMalloc(&b, big) == 0);
    CHECK(cudaFree(b) == 0);
    CHECK(cudaMalloc(&c, big) == 2);
    CHECK(cudaStreamEndCapture(stream, &graph) == 0 && graph);
    CHECK(cudaStreamEndCapture(stream, &graph) != 0); /* no capture: the runtime's error, nothing counted */
    CHECK(cudaMalloc(&c, big) == 0 && cudaFree(c) == 0);
    CHECK(fake_cudart_malloc_calls() == 0);

    /* Stream-ordered calls on the capturing stream are the graph's (allocation and free nodes, run
     * with the graph): the runtime's. A vmmkit block freed there is freed as cudaFree frees it, so it
     * is not reused during the capture, whichever stream asks; other streams are vmmkit's. */
    cudaStream_t other = (cudaStream_t) 0x5101;
    void *kept = NULL, *graphs = NULL, *beside = NULL;
    CHECK(cudaMalloc(&kept, big) == 0);
    long frees_before = fake_cudart_free_calls();
    CHECK(cudaStreamBeginCapture(stream, 0) == 0);
    CHECK(cudaMallocAsync(&graphs, 4096, stream) == 0 && fake_cudart_malloc_calls() == 1);
    CHECK(cudaFreeAsync(graphs, stream) == 0 && fake_cudart_free_calls() == frees_before + 1);
    CHECK(cudaMallocAsync(&beside, 4096, other) == 0 && fake_cudart_malloc_calls() == 1);
    CHECK(cudaFreeAsync(kept, stream) == 0 && fake_cudart_free_calls() == frees_before + 1);
    CHECK(cudaMallocAsync(&c, big, other) == 2);
    CHECK(cudaStreamEndCapture(stream, &graph) == 0);
    CHECK(cudaMallocAsync(&c, big, other) == 0 && c == kept);
    CHECK(cudaFreeAsync(c, other) == 0 && cudaFreeAsync(beside, other) == 0);
    CHECK(cudaMallocAsync(&c, 4096, stream) == 0 && cudaFree(c) == 0);
    CHECK(fake_cudart_malloc_calls() == 1);
}

/* The PyTorch pluggable-allocator pair, found as torch finds it: by name in the shim. */
static void torch(void) {
    void *(*alloc)(long, int, cudaStream_t) = (void *(*)(long, int, cudaStream_t)) dlsym(RTLD_DEFAULT, "vmmkit_torch_alloc");
    void (*release)(void *, long, int, cudaStream_t) =
        (void (*)(void *, long, int, cudaStream_t)) dlsym(RTLD_DEFAULT, "vmmkit_torch_free");
    CHECK(alloc && release);
    long before = fake_cudart_malloc_calls();
    cudaStream_t stream = (cudaStream_t) 0x5700;
    void *a = alloc(1 << 20, 0, stream), *b = alloc(1 << 20, 0, stream);
    CHECK(a && b && a != b);
    round_trip(a, b, 1 << 20, 11, stream);
    release(a, 1 << 20, 0, stream);
    release(b, 1 << 20, 0, stream);
    CHECK(alloc(-1, 0, stream) == NULL);
    CHECK(fake_cudart_malloc_calls() - before == expected_stand_in_calls(2));
}

/* The same pair with the shim loaded by dlopen (VMMKIT_SHIM), not preloaded, as PyTorch loads a
 * pluggable allocator: vmmkit starts its JVM at load and serves the pair. */
static void pluggable(void) {
    const char *path = getenv("VMMKIT_SHIM");
    CHECK(path != NULL);
    void *shim = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECK(shim != NULL);
    void *(*alloc)(long, int, cudaStream_t) = (void *(*)(long, int, cudaStream_t)) dlsym(shim, "vmmkit_torch_alloc");
    void (*release)(void *, long, int, cudaStream_t) =
        (void (*)(void *, long, int, cudaStream_t)) dlsym(shim, "vmmkit_torch_free");
    CHECK(alloc && release);
    long before = fake_cudart_malloc_calls();
    void *a = alloc(1 << 20, 0, NULL), *b = alloc(4096, 0, NULL);
    CHECK(a && b && a != b);
    round_trip(a, b, 4096, 5, NULL);
    release(a, 1 << 20, 0, NULL);
    release(b, 4096, 0, NULL);
    CHECK(fake_cudart_malloc_calls() == before);
}

/* Forks; the child runs work(before) and leaves with _exit, and the parent checks that it passed.
 * _exit, not exit: in a child of a multithreaded process, exit-time handlers of other libraries
 * (the JVM's among them) may wait on locks whose owners did not survive fork. */
static void in_forked_child(void (*work)(long before), long before) {
    fflush(NULL);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        work(before);
        fflush(NULL);
        _exit(0);
    }
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* CUDA's idiom for initialising the runtime, then, once the harness has seen vmmkit report itself
 * ready (it answers on stdin), the first allocation: the JVM started before any allocation. */
static void early_start(void) {
    CHECK(cudaFree(NULL) == 0);
    printf("initialised\n");
    fflush(stdout);
    char go[16];
    CHECK(fgets(go, sizeof go, stdin) != NULL);
    long before = fake_cudart_malloc_calls();
    void *p = NULL;
    CHECK(cudaMalloc(&p, 4096) == 0 && p);
    CHECK(fake_cudart_malloc_calls() == before); /* vmmkit served it */
    CHECK(cudaFree(p) == 0);
}

/* The child of fork_early: its allocation goes to the runtime. */
static void allocate_through_the_runtime(long before) {
    void *a = NULL;
    CHECK(cudaMalloc(&a, 4096) == 0 && a);
    CHECK(cudaFree(a) == 0);
    CHECK(fake_cudart_malloc_calls() - before == 1);
}

/* The runtime initialised, and a fork right away, while the JVM may still be starting: the child's
 * allocations go to the runtime, the parent's to vmmkit. */
static void fork_early(void) {
    CHECK(cudaFree(NULL) == 0);
    long before = fake_cudart_malloc_calls();
    in_forked_child(allocate_through_the_runtime, before);
    void *p = NULL;
    CHECK(cudaMalloc(&p, 4096) == 0 && p);
    CHECK(fake_cudart_malloc_calls() == before); /* vmmkit served the parent */
    CHECK(cudaFree(p) == 0);
}

/* The runtime initialised, and the program ends at once, while the JVM may still be starting. */
static void init_only(void) {
    CHECK(cudaFree(NULL) == 0);
}

enum { THREADS = 8, ROUNDS = 2000, KEEP = 16 };
static volatile int thread_failed;

static void *worker(void *arg) {
    unsigned id = (unsigned) (uintptr_t) arg, seed = id * 7919 + 1;
    struct { unsigned char *ptr; size_t size; unsigned tag; } held[KEEP] = {{0}};
    unsigned char buf[8192];
    for (int round = 0; round < ROUNDS && !thread_failed; round++) {
        int slot = round % KEEP;
        if (held[slot].ptr) { /* verify, then free */
            if (cudaMemcpy(buf, held[slot].ptr, held[slot].size, D2H) != 0) thread_failed = 1;
            unsigned char want[8192];
            fill(want, held[slot].size, held[slot].tag);
            if (memcmp(buf, want, held[slot].size) != 0 || cudaFree(held[slot].ptr) != 0) thread_failed = 1;
        }
        seed = seed * 1103515245 + 12345;
        size_t size = 1 + (seed >> 8) % sizeof buf;
        unsigned tag = id * 100000 + round;
        if (cudaMalloc((void **) &held[slot].ptr, size) != 0) { thread_failed = 1; break; }
        fill(buf, size, tag);
        if (cudaMemcpy(held[slot].ptr, buf, size, H2D) != 0) thread_failed = 1;
        held[slot].size = size;
        held[slot].tag = tag;
    }
    for (int slot = 0; slot < KEEP; slot++)
        if (held[slot].ptr && cudaFree(held[slot].ptr) != 0) thread_failed = 1;
    return NULL;
}

/* Threads on two devices: each allocates on its device, switches to the other and frees there, so
 * every free names the wrong current device. Device d serves DEVICE_ROUNDS * (threads on d) allocations. */
enum { DEVICE_THREADS = 6, DEVICE_ROUNDS = 500 };

static void *device_worker(void *arg) {
    int device = (int) (uintptr_t) arg % 2;
    for (int round = 0; round < DEVICE_ROUNDS && !thread_failed; round++) {
        void *p = NULL;
        size_t size = 256 + (size_t) round * 61;
        if (cudaSetDevice(device) != 0 || cudaMalloc(&p, size) != 0) { thread_failed = 1; break; }
        unsigned char mark = (unsigned char) round, back = 0;
        if (cudaMemcpy(p, &mark, 1, H2D) != 0) thread_failed = 1;
        if (cudaSetDevice(1 - device) != 0) thread_failed = 1;
        if (cudaMemcpy(&back, p, 1, D2H) != 0 || back != mark || cudaFree(p) != 0) thread_failed = 1;
    }
    return NULL;
}

static void device_threads(void) {
    long before = fake_cudart_malloc_calls();
    pthread_t t[DEVICE_THREADS];
    for (int i = 0; i < DEVICE_THREADS; i++) CHECK(pthread_create(&t[i], NULL, device_worker, (void *) (uintptr_t) i) == 0);
    for (int i = 0; i < DEVICE_THREADS; i++) pthread_join(t[i], NULL);
    CHECK(!thread_failed);
    CHECK(fake_cudart_malloc_calls() - before == expected_stand_in_calls((long) DEVICE_THREADS * DEVICE_ROUNDS));
}

static void threads(void) {
    long before = fake_cudart_malloc_calls();
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, worker, (void *) (uintptr_t) i) == 0);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    CHECK(!thread_failed);
    CHECK(fake_cudart_malloc_calls() - before == expected_stand_in_calls((long) THREADS * ROUNDS));
}

/* The child of forks: the JVM's threads did not come along, so everything goes to the runtime. */
static void round_trips_through_the_runtime(long before) {
    void *a = NULL, *b = NULL;
    CHECK(cudaMalloc(&a, 1 << 16) == 0 && cudaMalloc(&b, 1 << 16) == 0);
    round_trip(a, b, 1 << 16, 9, NULL);
    CHECK(cudaFree(a) == 0 && cudaFree(b) == 0);
    CHECK(fake_cudart_malloc_calls() - before == 2);
}

static void forks(void) {
    void *parent_block = NULL;
    CHECK(cudaMalloc(&parent_block, 4096) == 0);
    long before = fake_cudart_malloc_calls();
    in_forked_child(round_trips_through_the_runtime, before);
    void *after = NULL;
    CHECK(cudaMalloc(&after, 1 << 16) == 0);
    round_trip(after, parent_block, 4096, 3, NULL);
    CHECK(cudaFree(after) == 0 && cudaFree(parent_block) == 0);
    CHECK(fake_cudart_malloc_calls() - before == expected_stand_in_calls(1));
}

/* The pluggable entry points from several threads, sizes on both sides of the 1 MiB under which a
 * free waits for its thread's next allocation: every thread checks its data before each free, and
 * each ends with a free waiting, which the main thread's next allocation (or the exit) delivers. The
 * end-to-end test checks that the stats count every free. */
enum { TORCH_THREADS = 6, TORCH_ROUNDS = 400, TORCH_KEEP = 4 };
static void *(*torch_alloc_fn)(long, int, cudaStream_t);
static void (*torch_free_fn)(void *, long, int, cudaStream_t);

static void *torch_worker(void *arg) {
    unsigned id = (unsigned) (uintptr_t) arg, seed = id * 104729 + 7;
    cudaStream_t stream = (cudaStream_t) (uintptr_t) (id % 2 ? 0 : 0x7700 + id);
    struct { void *ptr; size_t size; unsigned tag; } held[TORCH_KEEP] = {{0}};
    for (int round = 0; round < TORCH_ROUNDS && !thread_failed; round++) {
        int slot = round % TORCH_KEEP;
        if (held[slot].ptr) {
            unsigned char got[64], want[64];
            size_t n = held[slot].size < sizeof got ? held[slot].size : sizeof got;
            fill(want, n, held[slot].tag);
            if (cudaMemcpy(got, held[slot].ptr, n, D2H) != 0 || memcmp(got, want, n) != 0) thread_failed = 1;
            torch_free_fn(held[slot].ptr, (long) held[slot].size, 0, stream);
        }
        seed = seed * 1103515245 + 12345;
        size_t size = (seed >> 8) % 5 == 0 ? (1 << 20) + 4096 * ((seed >> 4) % 64) : 1 + (seed >> 8) % 65536;
        void *p = torch_alloc_fn((long) size, 0, stream);
        if (!p) { thread_failed = 1; break; }
        unsigned char buf[64];
        size_t n = size < sizeof buf ? size : sizeof buf;
        fill(buf, n, seed);
        if (cudaMemcpy(p, buf, n, H2D) != 0) thread_failed = 1;
        held[slot].ptr = p;
        held[slot].size = size;
        held[slot].tag = seed;
    }
    for (int slot = 0; slot < TORCH_KEEP; slot++)
        if (held[slot].ptr) torch_free_fn(held[slot].ptr, (long) held[slot].size, 0, stream);
    return NULL;
}

static void torch_threads(void) {
    torch_alloc_fn = (void *(*)(long, int, cudaStream_t)) dlsym(RTLD_DEFAULT, "vmmkit_torch_alloc");
    torch_free_fn = (void (*)(void *, long, int, cudaStream_t)) dlsym(RTLD_DEFAULT, "vmmkit_torch_free");
    CHECK(torch_alloc_fn && torch_free_fn);
    long before = fake_cudart_malloc_calls();
    pthread_t t[TORCH_THREADS];
    for (int i = 0; i < TORCH_THREADS; i++) CHECK(pthread_create(&t[i], NULL, torch_worker, (void *) (uintptr_t) i) == 0);
    for (int i = 0; i < TORCH_THREADS; i++) pthread_join(t[i], NULL);
    CHECK(!thread_failed);
    void *p = torch_alloc_fn(4096, 0, NULL); /* takes the ended threads' waiting frees to Java */
    CHECK(p != NULL);
    torch_free_fn(p, 4096, 0, NULL);          /* waits until the exit */
    CHECK(fake_cudart_malloc_calls() - before == expected_stand_in_calls((long) TORCH_THREADS * TORCH_ROUNDS + 1));
}

static const struct { const char *name; void (*run)(void); } scenarios[] = {
    {"basic", basic}, {"errors", errors}, {"devices", devices}, {"foreign", foreign},
    {"threads", threads}, {"fork", forks}, {"torch", torch}, {"by_handle", by_handle}, {"peer", peer},
    {"device_threads", device_threads},
    {"torch_threads", torch_threads},
    {"oom", oom}, {"capture", capture}, {"ipc", ipc}, {"ipc_errors", ipc_errors}, {"pluggable", pluggable},
    {"early_start", early_start}, {"init_only", init_only}, {"fork_early", fork_early},
};

/* Scenarios that `all` leaves out. */
static int only_by_name(const char *name) {
    return strcmp(name, "oom") == 0 || strcmp(name, "capture") == 0 || strncmp(name, "ipc", 3) == 0 || strcmp(name, "pluggable") == 0
        || strcmp(name, "early_start") == 0 || strcmp(name, "init_only") == 0 || strcmp(name, "fork_early") == 0;
}

int main(int argc, char **argv) {
    const char *mode = getenv("VMM_MODE");
    monitor = mode && strcmp(mode, "monitor") == 0;
    if (argc == 5 && strcmp(argv[1], "ipc_child") == 0) return ipc_child(argv[2], atoi(argv[3]), atoi(argv[4]));
    int ran = 0;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "die") == 0) { /* ends by SIGTERM, so no exit handler runs */
            fflush(stdout);
            raise(SIGTERM);
        }
        if (strcmp(argv[a], "fail") == 0) { /* exits with status 3: exit handlers run */
            fflush(stdout);
            exit(3);
        }
        for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
            int all = strcmp(argv[a], "all") == 0 && !only_by_name(scenarios[i].name);
            if (all || strcmp(argv[a], scenarios[i].name) == 0) {
                scenario = scenarios[i].name;
                scenarios[i].run();
                printf("ok %s\n", scenario);
                ran++;
            }
        }
    }
    CHECK(ran > 0);
    cudaDeviceSynchronize();
    return 0;
}
