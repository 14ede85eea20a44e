/*
 * jvm_bootstrap.c: starting (or joining) the JVM that runs vmmkit.
 *
 * The JVM is started on the first intercepted call (or at once, in the background, when a program
 * loads the library itself); Java then fills the entry table with C function pointers (FFM upcall
 * stubs), and every later call is a plain indirect call, no JNI.
 */
#include "shim.h"

#include <dlfcn.h>
#include <glob.h>
#include <jni.h>
#include <limits.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct entry_table java;
int monitor_mode;
int zero_copy;
int64_t passthrough_calls;
static int java_ready;             /* the table is filled and usable */
static volatile int in_forked_child; /* set by the atfork handler: the JVM's threads are gone */
static __thread int inside_start;  /* this thread is starting the JVM: pass through */
static pthread_once_t start_once = PTHREAD_ONCE_INIT;
static int started_early;          /* the JVM starts in the background, before any allocation (start_java_soon) */

int log_info(void) {
    const char *level = getenv("VMM_LOG");
    return level && (!strcmp(level, "info") || !strcmp(level, "debug"));
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

/* Writes `relative` taken from the folder holding this library (target/native) to `path`; false
 * when the library's own path is unknown. */
static int beside_this_library(char *path, size_t size, const char *relative) {
    Dl_info self;
    if (!dladdr((void *) beside_this_library, &self) || !self.dli_fname) return 0;
    snprintf(path, size, "%s", self.dli_fname);
    char *slash = strrchr(path, '/');
    if (slash) *slash = 0; else snprintf(path, size, ".");
    strncat(path, relative, size - strlen(path) - 1);
    return 1;
}

/* The checkout's own runtime (scripts/build-runtime.sh), two folders above this library: a program
 * that preloads the shim by itself finds a JVM where no Java 25 is installed, as on a GPU machine
 * the runtime was carried to. */
static const char *checkout_runtime(void) {
    static char home[PATH_MAX];
    return beside_this_library(home, sizeof home, "/../../runtime") ? home : NULL;
}

/* VMMKIT_JAVA_HOME (set by `vmmkit run`), JAVA_HOME, /usr/lib/jvm/temurin-25-*, then the checkout's
 * runtime; the home found is left in java_home. */
static char java_home[PATH_MAX];
static int find_libjvm(char *libjvm, size_t size) {
    const char *homes[9];
    int count = 0;
    homes[count++] = getenv("VMMKIT_JAVA_HOME");
    homes[count++] = getenv("JAVA_HOME");
    glob_t found = {0};
    glob("/usr/lib/jvm/temurin-25-*", 0, NULL, &found);
    for (size_t i = 0; i < found.gl_pathc && count < 8; i++) homes[count++] = found.gl_pathv[i];
    homes[count++] = checkout_runtime();
    int ok = 0;
    for (int i = 0; i < count && !ok; i++) {
        if (!homes[i] || !*homes[i]) continue;
        snprintf(libjvm, size, "%s/lib/server/libjvm.so", homes[i]);
        ok = access(libjvm, R_OK) == 0 && java_version_at_least_25(homes[i]);
        if (ok) snprintf(java_home, sizeof java_home, "%s", homes[i]);
    }
    globfree(&found);
    return ok;
}

/* VMMKIT_JAR, else vmmkit.jar next to the folder holding this library (target/native/..). */
static void find_jar(char *jar, size_t size) {
    const char *env = getenv("VMMKIT_JAR");
    if (env && *env) snprintf(jar, size, "%s", env);
    else beside_this_library(jar, size, "/../vmmkit.jar");
}

/* The AOT cache (see AotTraining): VMMKIT_AOT_CACHE when set (`vmmkit run` sets it to the one
 * scripts/build-runtime.sh made for its runtime), else the Java home's own (that script writes it
 * into the runtime), else the one the build writes next to the jar. A cache matches the JVM that
 * trained it alone. */
static void add_aot_cache(const char *jar, JavaVMOption *options, int *count) {
    static char option[PATH_MAX + 32];
    const char *chosen = getenv("VMMKIT_AOT_CACHE");
    static char home_cache[PATH_MAX];
    snprintf(home_cache, sizeof home_cache, "%s/vmmkit.aot", java_home);
    if (!(chosen && *chosen) && java_home[0]) chosen = home_cache;
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
        fprintf(stderr, "vmmkit: no Java 25 runtime found (set VMMKIT_JAVA_HOME or JAVA_HOME, or build the "
                        "checkout's with scripts/build-runtime.sh)\n");
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
    cu_init_fn init = (cu_init_fn) lookup(libcuda, "cuInit");
    cu_device_get_fn device_get = (cu_device_get_fn) lookup(libcuda, "cuDeviceGet");
    cu_ctx_retain_fn retain = (cu_ctx_retain_fn) lookup(libcuda, "cuDevicePrimaryCtxRetain");
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
    java.started_early = __atomic_load_n(&started_early, __ATOMIC_ACQUIRE);
    int started = 0;
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 8 << 20);
    if (pthread_create(&thread, &attr, bootstrap, &started) == 0) {
        if (!java.started_early) init_cuda_while_java_starts();
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
        fprintf(stderr, "vmmkit: %s mode ready in %.1f ms (JVM %s in %.1f ms%s)\n", monitor_mode ? "monitor" : "vmm",
                total_ms, java.owns_jvm ? "started" : "attached", jvm_ms,
                java.started_early ? "; started early, beside the program" : "");
}

static void mark_forked_child(void) { in_forked_child = 1; }

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

void start_java_soon(void) {
    if (in_forked_child || inside_start || __atomic_load_n(&started_early, __ATOMIC_RELAXED)) return;
    if (__atomic_exchange_n(&started_early, 1, __ATOMIC_ACQ_REL)) return;
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* Without the thread, the first allocation starts the JVM as before (it skips the CUDA warm-up:
     * CUDA is initialising already). */
    pthread_create(&thread, &attr, start_in_background, NULL);
    pthread_attr_destroy(&attr);
}

__attribute__((constructor)) static void on_load(void) {
    pthread_atfork(NULL, NULL, mark_forked_child);
    const char *opt_in = getenv("VMM_ZERO_COPY");
    zero_copy = opt_in && strcmp(opt_in, "1") == 0;
    /* Preloaded, the library is in every process of the command, most of which never touch CUDA:
     * the JVM starts when the program's CUDA runtime initialises (start_java_soon), or at its first
     * allocation. Loaded on purpose (a pluggable allocator), it will serve allocations soon: start
     * the JVM now, beside the program's own start-up (CUDA's initialisation, model building). In
     * both cases the CUDA warm-up is left to the program: its device is not chosen yet. */
    if (!loaded_by_preload()) start_java_soon();
}
