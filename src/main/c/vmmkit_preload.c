/*
 * vmmkit_preload.c: the native entry point of vmmkit.
 *
 * Loaded with LD_PRELOAD (or as a PyTorch pluggable allocator), it intercepts the CUDA runtime's
 * allocation calls and hands them to vmmkit's allocator, which runs in a JVM inside this process.
 * The JVM is started on the first intercepted call; Java then fills a table of C function
 * pointers (FFM upcall stubs), and every later call is a plain indirect call, no JNI.
 *
 * Rule of this file: the host program keeps running whatever state vmmkit is in. Whenever vmmkit
 * cannot serve a call (monitor mode, a pointer it does not own, a forked child, a JVM that did not
 * start) the call goes to the real CUDA runtime, found with dlsym.
 *
 * No CUDA headers: the few types and values used are declared here, as in CUDA's driver_types.h.
 *
 * Several devices and processes: peer access (cudaDeviceEnablePeerAccess/DisablePeerAccess) goes to
 * the real runtime first and, once it agreed, to vmmkit, which grants or revokes the peer on every
 * mapping of the peer device's allocator. IPC of vmmkit pointers (cudaIpcGetMemHandle/OpenMemHandle/
 * CloseMemHandle) is vmmkit's own: its handles carry a magic; other handles and pointers go to the
 * runtime. Cross-device copies (cudaMemcpyPeer[Async], cudaMemcpy with cudaMemcpyDefault) need
 * nothing: vmmkit memory lives in the unified address space, so the runtime copies it as it is.
 * The driver API counterparts (cuCtxEnablePeerAccess, cuIpc*) are not interposed: PyTorch, CuPy and
 * NCCL's use of user buffers go through the runtime calls above.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <glob.h>
#include <jni.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

struct entry_table java;
static int java_ready;             /* the table is filled and usable */
int monitor_mode;
static volatile int in_forked_child; /* set by the atfork handler: the JVM's threads are gone */
static __thread int inside_start;  /* this thread is starting the JVM: pass through */
static int64_t passthrough_calls;  /* allocation calls served by the real runtime */
static int zero_copy;              /* VMM_ZERO_COPY=1: device-to-device copies may become remaps */
static pthread_once_t start_once = PTHREAD_ONCE_INIT;
static int started_at_load;        /* loaded with dlopen: the JVM starts at once, in the background */

static int log_info(void) {
    const char *level = getenv("VMM_LOG");
    return level && (!strcmp(level, "info") || !strcmp(level, "debug"));
}

/* ---- The real CUDA runtime --------------------------------------------------------------- */

static struct {
    cudaError_t (*cudaMalloc)(void **, size_t);
    cudaError_t (*cudaFree)(void *);
    cudaError_t (*cudaMallocAsync)(void **, size_t, cudaStream_t);
    cudaError_t (*cudaFreeAsync)(void *, cudaStream_t);
    cudaError_t (*cudaMemcpy)(void *, const void *, size_t, int);
    cudaError_t (*cudaMemcpyAsync)(void *, const void *, size_t, int, cudaStream_t);
    cudaError_t (*cudaGetDevice)(int *);
    cudaError_t (*cudaDeviceEnablePeerAccess)(int, unsigned int);
    cudaError_t (*cudaDeviceDisablePeerAccess)(int);
    cudaError_t (*cudaIpcGetMemHandle)(cudaIpcMemHandle_t *, void *);
    cudaError_t (*cudaIpcOpenMemHandle)(void **, cudaIpcMemHandle_t, unsigned int);
    cudaError_t (*cudaIpcCloseMemHandle)(void *);
} real;
static pthread_once_t real_once = PTHREAD_ONCE_INIT;

/* Finds a loaded libcudart: a library loaded with dlopen(RTLD_LOCAL), as Python does, is not
 * visible to dlsym(RTLD_NEXT), so we look through the loaded objects ourselves. */
static int find_cudart(struct dl_phdr_info *info, size_t size, void *found) {
    (void) size;
    if (info->dlpi_name && strstr(info->dlpi_name, "libcudart.so")) {
        *(void **) found = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
        return *(void **) found != NULL;
    }
    return 0;
}

/* ---- Lookups by handle ---------------------------------------------------------------------
 * LD_PRELOAD only wins lookups through the global scope. A program that loads the runtime itself
 * and asks it by handle (CuPy: dlopen("libcudart.so.13"), then dlsym(handle, "cudaMalloc")) would
 * bypass vmmkit. So vmmkit also answers dlsym: a lookup of an intercepted name that finds the
 * runtime's function returns vmmkit's instead, and the runtime's becomes the real one. Every other
 * lookup goes straight to libc's dlsym, as a tail call, so that RTLD_NEXT still means "after the
 * caller". dlvsym (a lookup with a version, as cuda-python's loaders do) is answered the same way.
 * Inside this file, lookups use next_dlsym, never the exported dlsym. */
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

static int log_lookups; /* VMM_LOG=debug: each lookup of a cuda* name by handle is printed */

static void find_next_dlsym(void) {
    next_dlsym = (dlsym_fn) libc_function("dlsym");
    next_dlvsym = (dlvsym_fn) libc_function("dlvsym");
    const char *level = getenv("VMM_LOG");
    log_lookups = level && strcmp(level, "debug") == 0;
}

static void *lookup(void *handle, const char *name) {
    pthread_once(&next_dlsym_once, find_next_dlsym);
    return next_dlsym ? next_dlsym(handle, name) : NULL;
}

static void *real_symbol(void *cudart, const char *name) {
    void *fn = lookup(RTLD_NEXT, name);
    return fn ? fn : cudart ? lookup(cudart, name) : NULL;
}

static void resolve_real(void) {
    void *cudart = NULL;
    dl_iterate_phdr(find_cudart, &cudart);
#define RESOLVE(name) real.name = (__typeof__(real.name)) real_symbol(cudart, #name)
    RESOLVE(cudaMalloc); RESOLVE(cudaFree); RESOLVE(cudaMallocAsync); RESOLVE(cudaFreeAsync);
    RESOLVE(cudaMemcpy); RESOLVE(cudaMemcpyAsync); RESOLVE(cudaGetDevice);
    RESOLVE(cudaDeviceEnablePeerAccess); RESOLVE(cudaDeviceDisablePeerAccess);
    RESOLVE(cudaIpcGetMemHandle); RESOLVE(cudaIpcOpenMemHandle); RESOLVE(cudaIpcCloseMemHandle);
#undef RESOLVE
}

/* Calls the real function, or fails cleanly when no runtime is loaded. */
#define REAL(name, ...) (pthread_once(&real_once, resolve_real), \
    real.name ? real.name(__VA_ARGS__) : no_runtime(#name))

static cudaError_t no_runtime(const char *name) {
    fprintf(stderr, "vmmkit: %s: no CUDA runtime (libcudart) found in this process\n", name);
    return cudaErrorInitializationError;
}

int current_device(void) {
    int device = 0;
    pthread_once(&real_once, resolve_real);
    if (real.cudaGetDevice && real.cudaGetDevice(&device) != cudaSuccess) device = 0;
    return device;
}

/* ---- Starting (or joining) the JVM ------------------------------------------------------- */

static int java_version_at_least_25(const char *home) {
    char path[PATH_MAX], line[256];
    snprintf(path, sizeof path, "%s/release", home);
    FILE *release = fopen(path, "r");
    if (!release) return 1; /* no release file (custom image): let JNI_CreateJavaVM decide */
    int version = 0;
    while (fgets(line, sizeof line, release))
        if (sscanf(line, "JAVA_VERSION=\"%d", &version) == 1) break;
    fclose(release);
    return version >= 25;
}

/* VMMKIT_JAVA_HOME (set by `vmmkit run`), JAVA_HOME, then /usr/lib/jvm/temurin-25-*. */
static int find_libjvm(char *libjvm, size_t size) {
    const char *homes[8];
    int count = 0;
    homes[count++] = getenv("VMMKIT_JAVA_HOME");
    homes[count++] = getenv("JAVA_HOME");
    glob_t found = {0};
    glob("/usr/lib/jvm/temurin-25-*", 0, NULL, &found);
    for (size_t i = 0; i < found.gl_pathc && count < 8; i++) homes[count++] = found.gl_pathv[i];
    int ok = 0;
    for (int i = 0; i < count && !ok; i++) {
        if (!homes[i] || !*homes[i]) continue;
        snprintf(libjvm, size, "%s/lib/server/libjvm.so", homes[i]);
        ok = access(libjvm, R_OK) == 0 && java_version_at_least_25(homes[i]);
    }
    globfree(&found);
    return ok;
}

/* VMMKIT_JAR, else vmmkit.jar next to the folder holding this library (target/native/..). */
static void find_jar(char *jar, size_t size) {
    const char *env = getenv("VMMKIT_JAR");
    Dl_info self;
    if (env && *env) {
        snprintf(jar, size, "%s", env);
    } else if (dladdr((void *) find_jar, &self) && self.dli_fname) {
        snprintf(jar, size, "%s", self.dli_fname);
        char *slash = strrchr(jar, '/');
        if (slash) *slash = 0; else snprintf(jar, size, ".");
        strncat(jar, "/../vmmkit.jar", size - strlen(jar) - 1);
    }
}

/* The AOT cache (see AotTraining): VMMKIT_AOT_CACHE when set (`vmmkit run` sets it to the one
 * scripts/build-runtime.sh made for its runtime), else the one the build writes next to the jar.
 * A cache matches the JVM that trained it alone. */
static void add_aot_cache(const char *jar, JavaVMOption *options, int *count) {
    static char option[PATH_MAX + 32];
    const char *chosen = getenv("VMMKIT_AOT_CACHE");
    if (chosen && *chosen && access(chosen, R_OK) == 0) {
        snprintf(option, sizeof option, "-XX:AOTCache=%s", chosen);
        options[(*count)++].optionString = option;
        return;
    }
    const char *slash = strrchr(jar, '/');
    size_t length = strlen(jar);
    if (!slash || strchr(jar, ':') || length < 4 || strcmp(jar + length - 4, ".jar") != 0) return;
    snprintf(option, sizeof option, "-XX:AOTCache=%.*s/vmmkit.aot", (int) (slash - jar), jar);
    if (access(option + strlen("-XX:AOTCache="), R_OK) == 0) options[(*count)++].optionString = option;
}

/* HotSpot ends the process when its initialisation fails (e.g. no room for the heap), calling its
 * abort hook first. While we create it, jump back instead: the host keeps running, on the real
 * runtime. The half-made JVM is never touched again. After a successful start the hook returns. */
static __thread int creating_jvm;
static __thread jmp_buf jvm_gave_up;

static void JNICALL abort_hook(void) {
    if (creating_jvm) longjmp(jvm_gave_up, 1);
}

static jint create_jvm(JavaVM **vm, JNIEnv **env, const char *jar) {
    char libjvm[PATH_MAX], class_path[PATH_MAX + 32];
    if (!find_libjvm(libjvm, sizeof libjvm)) {
        fprintf(stderr, "vmmkit: no Java 25 runtime found (set VMMKIT_JAVA_HOME or JAVA_HOME)\n");
        return JNI_ERR;
    }
    void *handle = dlopen(libjvm, RTLD_NOW | RTLD_GLOBAL); /* as the java launcher does */
    jint (*create)(JavaVM **, void **, void *) = handle ? lookup(handle, "JNI_CreateJavaVM") : NULL;
    if (!create) {
        fprintf(stderr, "vmmkit: cannot load %s: %s\n", libjvm, dlerror());
        return JNI_ERR;
    }
    snprintf(class_path, sizeof class_path, "-Djava.class.path=%s", jar);
    JavaVMOption options[48] = {
        {.optionString = class_path},
        {.optionString = "-Xrs"},                  /* leave SIGINT, SIGTERM... to the host */
        {.optionString = "--enable-native-access=ALL-UNNAMED"},
        {.optionString = "-XX:+UseSerialGC"},      /* no GC threads competing with the host */
        {.optionString = "-XX:-UsePerfData"},      /* no hsperfdata file, faster start */
        /* Full tiered JIT kept: C1-only started ~40 ms faster but the pair cost rose 100 -> 130 ns. */
        {.optionString = "-Xss512k"},
        {.optionString = "-XX:+DisplayVMOutputToStderr"}, /* the host's stdout stays its own */
        {.optionString = "-Xlog:disable"},
        {.optionString = "-Xlog:all=warning:stderr"},
        {.optionString = "abort", .extraInfo = (void *) abort_hook},
    };
    int count = 10;
    add_aot_cache(jar, options, &count);
    /* VMMKIT_JVM_OPTS: extra options separated by spaces (no quoting). Copied: tokens are kept. */
    static char extra[4096];
    snprintf(extra, sizeof extra, "%s", getenv("VMMKIT_JVM_OPTS") ? getenv("VMMKIT_JVM_OPTS") : "");
    for (char *save = NULL, *opt = strtok_r(extra, " \t", &save); opt && count < 48;
         opt = strtok_r(NULL, " \t", &save))
        options[count++].optionString = opt;
    JavaVMInitArgs args = {.version = JNI_VERSION_21, .nOptions = count, .options = options,
                           .ignoreUnrecognized = JNI_FALSE};
    volatile jint result = JNI_ERR;
    creating_jvm = 1;
    if (!setjmp(jvm_gave_up)) result = create(vm, (void **) env, &args);
    creating_jvm = 0;
    return result;
}

/* A host that is itself a JVM: find it through the already loaded libjvm. */
static JavaVM *running_jvm(void) {
    jint (*created)(JavaVM **, jsize, jsize *) = lookup(RTLD_DEFAULT, "JNI_GetCreatedJavaVMs");
    JavaVM *vm = NULL;
    jsize count = 0;
    return created && created(&vm, 1, &count) == JNI_OK && count > 0 ? vm : NULL;
}

/* In a host JVM our jar is not on the class path: load the class through a URLClassLoader. */
static jclass class_from_jar(JNIEnv *env, const char *jar, const char *name) {
    jclass file = (*env)->FindClass(env, "java/io/File");
    jclass url = (*env)->FindClass(env, "java/net/URL");
    jclass loader = (*env)->FindClass(env, "java/net/URLClassLoader");
    if (!file || !url || !loader) return NULL;
    jobject path = (*env)->NewObject(env, file,
            (*env)->GetMethodID(env, file, "<init>", "(Ljava/lang/String;)V"), (*env)->NewStringUTF(env, jar));
    jobject uri = (*env)->CallObjectMethod(env, path, (*env)->GetMethodID(env, file, "toURI", "()Ljava/net/URI;"));
    jclass uri_class = (*env)->FindClass(env, "java/net/URI");
    jobject as_url = (*env)->CallObjectMethod(env, uri, (*env)->GetMethodID(env, uri_class, "toURL", "()Ljava/net/URL;"));
    if ((*env)->ExceptionCheck(env)) return NULL;
    jobjectArray urls = (*env)->NewObjectArray(env, 1, url, as_url);
    jobject instance = (*env)->CallStaticObjectMethod(env, loader,
            (*env)->GetStaticMethodID(env, loader, "newInstance", "([Ljava/net/URL;)Ljava/net/URLClassLoader;"), urls);
    if ((*env)->ExceptionCheck(env)) return NULL;
    jclass class_loader = (*env)->FindClass(env, "java/lang/ClassLoader");
    return (jclass) (*env)->CallObjectMethod(env, instance,
            (*env)->GetMethodID(env, class_loader, "loadClass", "(Ljava/lang/String;)Ljava/lang/Class;"),
            (*env)->NewStringUTF(env, name));
}

/* Runs on a thread of its own with a known stack: HotSpot must not start on the host's primordial
 * thread (the java launcher avoids it too), and a small host thread stack would not do. */
static double jvm_ms; /* time JNI_CreateJavaVM took, for VMM_LOG=info */

static double ms_since(const struct timespec *t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (t1.tv_sec - t0->tv_sec) * 1e3 + (t1.tv_nsec - t0->tv_nsec) / 1e6;
}

static void *bootstrap(void *result) {
    inside_start = 1;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    JavaVM *vm = running_jvm();
    JNIEnv *env = NULL;
    char jar[PATH_MAX] = "";
    find_jar(jar, sizeof jar);
    java.owns_jvm = vm == NULL;
    if (vm ? (*vm)->AttachCurrentThread(vm, (void **) &env, NULL) : create_jvm(&vm, &env, jar)) {
        fprintf(stderr, "vmmkit: the JVM did not start\n");
        return NULL;
    }
    jvm_ms = ms_since(&t0);
    jclass entry = (*env)->FindClass(env, "dev/vmmkit/interpose/NativeBootstrap");
    if (!entry && !java.owns_jvm) {
        (*env)->ExceptionClear(env);
        entry = class_from_jar(env, jar, "dev.vmmkit.interpose.NativeBootstrap");
    }
    jmethodID method = entry ? (*env)->GetStaticMethodID(env, entry, "entryPoints", "(J)I") : NULL;
    jint status = method ? (*env)->CallStaticIntMethod(env, entry, method, (jlong) (intptr_t) &java) : -1;
    if ((*env)->ExceptionCheck(env)) {
        (*env)->ExceptionDescribe(env); /* to stderr */
        status = -1;
    }
    /* A positive status: Java has already said what was wrong (a bad setting, mismatched builds). */
    if (status < 0) fprintf(stderr, "vmmkit: cannot load vmmkit from %s\n", jar);
    *(int *) result = status == 0;
    (*vm)->DetachCurrentThread(vm);
    return NULL;
}

/* on_exit (glibc) rather than atexit: the exit status decides whether the run's peak profile is saved. */
static void call_java_at_exit(int status, void *unused) {
    (void) unused;
    if (!in_forked_child) java.at_exit(__atomic_load_n(&passthrough_calls, __ATOMIC_RELAXED), status);
}

/* A process's first CUDA call initialises the driver and the device's primary context (about
 * 200 ms on an H200), and starting the JVM takes about as long: this thread does the first while
 * the bootstrap thread does the second. It retains the primary context of the device the program
 * is using (the one its own first call would initialise) through the driver API, which leaves the
 * runtime's error state alone. The reference is kept for the process's life, as the runtime keeps
 * its own: Java opens its allocator on the first allocation, after the JVM is up, and a release
 * before that would destroy the context just made. Skipped when vmmkit runs on its host emulation
 * (VMM_DRIVER=host) or without libcuda. */
typedef int (*cu_init_fn)(unsigned int);
typedef int (*cu_device_get_fn)(int *, int);
typedef int (*cu_ctx_retain_fn)(void **, int);

static void init_cuda_while_java_starts(void) {
    const char *driver = getenv("VMM_DRIVER");
    if (driver && *driver && strcmp(driver, "cuda") != 0 && strcmp(driver, "auto") != 0) return;
    void *libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!libcuda) return;
    cu_init_fn init = (cu_init_fn) dlsym(libcuda, "cuInit");
    cu_device_get_fn device_get = (cu_device_get_fn) dlsym(libcuda, "cuDeviceGet");
    cu_ctx_retain_fn retain = (cu_ctx_retain_fn) dlsym(libcuda, "cuDevicePrimaryCtxRetain");
    int device;
    void *context;
    if (init && device_get && retain && init(0) == 0 && device_get(&device, current_device()) == 0)
        retain(&context, device);
}

static void start_vmmkit(void) {
    const char *mode = getenv("VMM_MODE");
    monitor_mode = mode && *mode && strcmp(mode, "vmm") != 0;
    if (monitor_mode && strcmp(mode, "monitor") != 0)
        fprintf(stderr, "vmmkit: VMM_MODE=%s is not vmm or monitor; passing every call through\n", mode);
    const char *stats = getenv("VMM_STATS_FILE"), *trace = getenv("VMM_TRACE_FILE");
    if (monitor_mode && !(stats && *stats) && !(trace && *trace)) return; /* nothing to record */

    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    java.table_size = sizeof java;
    java.monitor_mode = monitor_mode;
    int started = 0;
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 8 << 20);
    if (pthread_create(&thread, &attr, bootstrap, &started) == 0) {
        if (!started_at_load) init_cuda_while_java_starts();
        pthread_join(thread, NULL);
    }
    pthread_attr_destroy(&attr);
    double total_ms = ms_since(&t0);
    if (!started) {
        fprintf(stderr, "vmmkit: passing every CUDA call through to the real runtime\n");
        return;
    }
    if (java.owns_jvm) on_exit(call_java_at_exit, NULL); /* a host JVM writes stats in a shutdown hook */
    __atomic_store_n(&java_ready, 1, __ATOMIC_RELEASE);
    if (log_info())
        fprintf(stderr, "vmmkit: %s mode ready in %.1f ms (JVM %s in %.1f ms)\n", monitor_mode ? "monitor" : "vmm",
                total_ms, java.owns_jvm ? "started" : "attached", jvm_ms);
}

static void mark_forked_child(void) { in_forked_child = 1; }

/* True when Java is up; starts it on the first call. Forked children and the thread starting
 * the JVM never wait for it. */
int java_up(void) {
    if (in_forked_child || inside_start) return 0;
    pthread_once(&start_once, start_vmmkit);
    return __atomic_load_n(&java_ready, __ATOMIC_ACQUIRE);
}

/* True when this library came in through LD_PRELOAD (vmmkit run), false when a program loaded it
 * with dlopen, as PyTorch's CUDAPluggableAllocator does. */
static int loaded_by_preload(void) {
    Dl_info self;
    const char *preload = getenv("LD_PRELOAD");
    if (!preload || !dladdr((void *) loaded_by_preload, &self) || !self.dli_fname) return 0;
    const char *name = strrchr(self.dli_fname, '/');
    return strstr(preload, name ? name + 1 : self.dli_fname) != NULL;
}

static void *start_in_background(void *unused) {
    (void) unused;
    java_up();
    return NULL;
}

__attribute__((constructor)) static void on_load(void) {
    pthread_atfork(NULL, NULL, mark_forked_child);
    const char *opt_in = getenv("VMM_ZERO_COPY");
    zero_copy = opt_in && strcmp(opt_in, "1") == 0;
    /* Preloaded, the library is in every process of the command, most of which never touch CUDA:
     * the JVM starts on the first intercepted call. Loaded on purpose (a pluggable allocator), it
     * will serve allocations soon: start the JVM now, beside the program's own start-up (CUDA's
     * initialisation, model building), so the first allocation does not wait for it. The CUDA
     * warm-up is left to the program here: its device is not chosen yet. */
    if (!loaded_by_preload()) {
        started_at_load = 1;
        pthread_t thread;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&thread, &attr, start_in_background, NULL) != 0) started_at_load = 0;
        pthread_attr_destroy(&attr);
    }
}

/* ---- The two decisions: serve with vmmkit, or forward (CALL_REAL) ----------------------- */

#define CALL_REAL (-1)

static int vmmkit_malloc(void **ptr, size_t size, int device, cudaStream_t stream) {
    if (!java_up() || monitor_mode) return CALL_REAL;
    if (!ptr) return cudaErrorInvalidValue;
    if (size == 0) { *ptr = NULL; return cudaSuccess; }
    if (size > INT64_MAX) return cudaErrorMemoryAllocation;
    int64_t result = java.allocate((int64_t) size, device < 0 ? current_device() : device,
                                   (int64_t) (intptr_t) stream);
    if (result == JAVA_PASS_THROUGH) return CALL_REAL;
    if (result < 0) return (int) -result;
    *ptr = (void *) (intptr_t) result;
    return cudaSuccess;
}

static int vmmkit_free(void *ptr, int device, int64_t stream) {
    if (!ptr || !java_up()) return CALL_REAL; /* cudaFree(NULL) initialises the runtime */
    if (monitor_mode) {
        java.record_free((int64_t) (intptr_t) ptr, stream); /* before: the address may be reused */
        return CALL_REAL;
    }
    int32_t result = java.release((int64_t) (intptr_t) ptr, device < 0 ? current_device() : device, stream);
    return result == JAVA_NOT_OURS ? CALL_REAL : result == JAVA_FREED ? cudaSuccess : -result;
}

/* After the real runtime served an allocation call: count it, and record it in monitor mode. */
static cudaError_t served_by_runtime(cudaError_t rc, void **ptr, size_t size, cudaStream_t stream) {
    __atomic_fetch_add(&passthrough_calls, 1, __ATOMIC_RELAXED);
    if (rc == cudaSuccess && ptr && *ptr && monitor_mode && java_up())
        java.record_alloc((int64_t) (intptr_t) *ptr, (int64_t) size, (int64_t) (intptr_t) stream);
    return rc;
}

static cudaError_t freed_by_runtime(cudaError_t rc) {
    __atomic_fetch_add(&passthrough_calls, 1, __ATOMIC_RELAXED);
    return rc;
}

/* ---- Exported CUDA runtime functions ----------------------------------------------------- */

EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size) {
    int rc = vmmkit_malloc(devPtr, size, -1, NULL);
    return rc != CALL_REAL ? rc : served_by_runtime(REAL(cudaMalloc, devPtr, size), devPtr, size, NULL);
}

EXPORT cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t stream) {
    int rc = vmmkit_malloc(devPtr, size, -1, stream);
    return rc != CALL_REAL ? rc
        : served_by_runtime(REAL(cudaMallocAsync, devPtr, size, stream), devPtr, size, stream);
}

/* The real cudaFree waits for the whole device; vmmkit instead promises (DEVICE_WIDE_STREAM)
 * never to reuse the memory before earlier work on any stream has finished. */
EXPORT cudaError_t cudaFree(void *devPtr) {
    int rc = vmmkit_free(devPtr, -1, DEVICE_WIDE_STREAM);
    return rc != CALL_REAL ? rc : freed_by_runtime(REAL(cudaFree, devPtr));
}

EXPORT cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t stream) {
    int rc = vmmkit_free(devPtr, -1, (int64_t) (intptr_t) stream);
    return rc != CALL_REAL ? rc : freed_by_runtime(REAL(cudaFreeAsync, devPtr, stream));
}

/* With VMM_ZERO_COPY=1, a device-to-device copy (or cudaMemcpyDefault) between two vmmkit
 * allocations is offered to Java first (seed: VmmOptimizer). Java remaps the pages when the copy is
 * a whole-buffer resize, the cost model favours it and the stream's earlier work is done; otherwise,
 * and for every other copy, the real runtime copies. */
static int remapped(void *dst, const void *src, size_t count, int kind, cudaStream_t stream) {
    if (!zero_copy || count == 0 || count > INT64_MAX) return 0;
    if (kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault) return 0;
    if (!java_up() || monitor_mode) return 0;
    return java.remap_copy((int64_t) (intptr_t) dst, (int64_t) (intptr_t) src, (int64_t) count, current_device(),
                           (int64_t) (intptr_t) stream) == JAVA_REMAPPED;
}

EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, int kind) {
    if (remapped(dst, src, count, kind, NULL)) return cudaSuccess;
    return REAL(cudaMemcpy, dst, src, count, kind);
}

EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, int kind, cudaStream_t stream) {
    if (remapped(dst, src, count, kind, stream)) return cudaSuccess;
    return REAL(cudaMemcpyAsync, dst, src, count, kind, stream);
}

/* ---- vmmkit_realloc ---------------------------------------------------------------------
 * realloc for device memory: the contents are kept up to the smaller size; the pointer stays the
 * same when the allocation shrinks or grows in place, and may change otherwise (the old one is then
 * freed as cudaFree frees). Defined cases:
 *   devPtr == NULL                    -> cudaErrorInvalidValue
 *   *devPtr == NULL                   -> as cudaMalloc(devPtr, size)
 *   size == 0                         -> cudaErrorInvalidValue, nothing changes (free with cudaFree)
 *   a pointer vmmkit did not hand out -> cudaErrorInvalidValue, nothing changes
 *   no memory for the new size        -> cudaErrorMemoryAllocation, the old allocation is unchanged */
EXPORT cudaError_t vmmkit_realloc(void **devPtr, size_t size) {
    if (!devPtr || size == 0) return cudaErrorInvalidValue;
    if (!*devPtr) return cudaMalloc(devPtr, size);
    if (!java_up() || monitor_mode) return cudaErrorInvalidValue; /* vmmkit handed out nothing */
    if (size > INT64_MAX) return cudaErrorMemoryAllocation;
    int64_t result = java.reallocate((int64_t) (intptr_t) *devPtr, (int64_t) size, current_device(), DEVICE_WIDE_STREAM);
    if (result < 0) return (int) -result;
    *devPtr = (void *) (intptr_t) result;
    return cudaSuccess;
}

/* ---- Peer access and IPC ------------------------------------------------------------------ */

/* The runtime keeps its own memory's peer state; vmmkit follows only once the runtime agreed, and
 * if vmmkit cannot grant, the runtime's grant is taken back so that both stay in step. */
EXPORT cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags) {
    cudaError_t rc = REAL(cudaDeviceEnablePeerAccess, peerDevice, flags);
    if (rc != cudaSuccess || !java_up() || monitor_mode) return rc;
    int32_t result = java.peer_access(current_device(), peerDevice, 1);
    if (result == 0) return cudaSuccess;
    REAL(cudaDeviceDisablePeerAccess, peerDevice);
    return -result;
}

EXPORT cudaError_t cudaDeviceDisablePeerAccess(int peerDevice) {
    cudaError_t rc = REAL(cudaDeviceDisablePeerAccess, peerDevice);
    if (rc == cudaSuccess && java_up() && !monitor_mode) {
        int32_t result = java.peer_access(current_device(), peerDevice, 0);
        if (result != 0) return -result;
    }
    return rc;
}

EXPORT cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr) {
    if (handle && devPtr && java_up() && !monitor_mode) {
        int32_t result = java.ipc_get_handle((int64_t) (intptr_t) devPtr, current_device(), (int64_t) (intptr_t) handle);
        if (result != JAVA_NOT_OURS) return result == 0 ? cudaSuccess : -result;
    }
    return REAL(cudaIpcGetMemHandle, handle, devPtr);
}

static int is_vmmkit_handle(const cudaIpcMemHandle_t *handle) {
    uint64_t magic;
    memcpy(&magic, handle->reserved, sizeof magic);
    return magic == VMMKIT_IPC_MAGIC;
}

/* The flags (cudaIpcMemLazyEnablePeerAccess) need nothing from vmmkit: the pages are mapped for the
 * current device and the peers its allocator granted. */
EXPORT cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle, unsigned int flags) {
    if (devPtr && is_vmmkit_handle(&handle) && java_up() && !monitor_mode) {
        int64_t result = java.ipc_open((int64_t) (intptr_t) &handle, current_device());
        if (result != JAVA_PASS_THROUGH) {
            if (result < 0) return (cudaError_t) -result;
            *devPtr = (void *) (intptr_t) result;
            return cudaSuccess;
        }
    }
    return REAL(cudaIpcOpenMemHandle, devPtr, handle, flags);
}

EXPORT cudaError_t cudaIpcCloseMemHandle(void *devPtr) {
    if (devPtr && java_up() && !monitor_mode) {
        int32_t result = java.ipc_close((int64_t) (intptr_t) devPtr);
        if (result == JAVA_FREED) return cudaSuccess;
        if (result != JAVA_NOT_OURS) return -result;
    }
    return REAL(cudaIpcCloseMemHandle, devPtr);
}

/* ---- PyTorch CUDAPluggableAllocator ------------------------------------------------------ */

EXPORT void *vmmkit_torch_alloc(ssize_t size, int device, cudaStream_t stream) {
    void *ptr = NULL;
    if (size < 0) return NULL;
    int rc = vmmkit_malloc(&ptr, (size_t) size, device, stream);
    if (rc == CALL_REAL) rc = served_by_runtime(REAL(cudaMallocAsync, &ptr, (size_t) size, stream), &ptr, size, stream);
    return rc == cudaSuccess ? ptr : NULL;
}

EXPORT void vmmkit_torch_free(void *ptr, ssize_t size, int device, cudaStream_t stream) {
    (void) size;
    if (vmmkit_free(ptr, device, (int64_t) (intptr_t) stream) == CALL_REAL && ptr)
        freed_by_runtime(REAL(cudaFreeAsync, ptr, stream));
}

/* ---- dlsym ------------------------------------------------------------------------------- */

/* Takes the runtime's own function as the real one, if none was found yet; returns vmmkit's. */
static void *substitute(void **real_slot, void *runtime_fn, void *ours) {
    if (runtime_fn == ours) return ours;
    void *expected = NULL;
    __atomic_compare_exchange_n(real_slot, &expected, runtime_fn, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
    return ours;
}

static void *intercepted(const char *name, void *runtime_fn) {
#define OURS(fn) if (strcmp(name, #fn) == 0) return substitute((void **) &real.fn, runtime_fn, (void *) fn)
    OURS(cudaMalloc); OURS(cudaFree); OURS(cudaMallocAsync); OURS(cudaFreeAsync);
    OURS(cudaMemcpy); OURS(cudaMemcpyAsync);
    OURS(cudaDeviceEnablePeerAccess); OURS(cudaDeviceDisablePeerAccess);
    OURS(cudaIpcGetMemHandle); OURS(cudaIpcOpenMemHandle); OURS(cudaIpcCloseMemHandle);
#undef OURS
    return runtime_fn;
}

/* Names vmmkit may answer: the runtime's cuda* functions. */
static int may_intercept(const char *name) {
    return name && strncmp(name, "cuda", 4) == 0;
}

EXPORT void *dlsym(void *handle, const char *name) {
    pthread_once(&next_dlsym_once, find_next_dlsym);
    if (handle == RTLD_NEXT || handle == RTLD_DEFAULT || !may_intercept(name)) {
        return next_dlsym(handle, name); /* a tail call: libc sees the original caller */
    }
    void *fn = next_dlsym(handle, name);
    void *answer = fn ? intercepted(name, fn) : NULL;
    if (log_lookups) fprintf(stderr, "vmmkit: dlsym(%p, %s) -> %p%s\n", handle, name, answer, answer != fn ? " (vmmkit)" : "");
    return answer;
}

EXPORT void *dlvsym(void *handle, const char *name, const char *version) {
    pthread_once(&next_dlsym_once, find_next_dlsym);
    if (handle == RTLD_NEXT || handle == RTLD_DEFAULT || !may_intercept(name)) {
        return next_dlvsym(handle, name, version); /* a tail call: libc sees the original caller */
    }
    void *fn = next_dlvsym(handle, name, version);
    void *answer = fn ? intercepted(name, fn) : NULL;
    if (log_lookups) fprintf(stderr, "vmmkit: dlvsym(%p, %s, %s) -> %p%s\n", handle, name, version ? version : "", answer, answer != fn ? " (vmmkit)" : "");
    return answer;
}
