/*
 * shim.h: what the files of the shim share. Nothing here is exported: the library is built with
 * -fvisibility=hidden and only functions marked EXPORT are seen by the program.
 *
 * No CUDA headers: the few types and values used are declared here, as in CUDA's driver_types.h.
 */
#ifndef VMMKIT_SHIM_H
#define VMMKIT_SHIM_H

#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))

typedef int cudaError_t;
typedef void *cudaStream_t;
enum {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3, /* returned only when no real runtime can be found */
    cudaErrorUnknown = 999,
};

/* cudaIpcMemHandle_t: 64 opaque bytes. vmmkit's own handles start with this magic ("VMMKIPC\1"). */
typedef struct { char reserved[64]; } cudaIpcMemHandle_t;
#define VMMKIT_IPC_MAGIC 0x014350494B4D4D56ULL
enum { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
       cudaMemcpyDeviceToDevice, cudaMemcpyDefault };

/* ---- The table Java fills (layout mirrored by NativeBootstrap.TABLE) ---------------------- */

/* Results of the Java entry points, mirrored by dev.vmmkit.interpose.InterposedCalls. */
#define JAVA_PASS_THROUGH (-1000) /* allocate: vmmkit cannot serve it, use the real runtime */
#define JAVA_FREED 0              /* release: vmmkit took the pointer back */
#define JAVA_NOT_OURS 1           /* release: not a vmmkit pointer, give it to the real runtime */
#define JAVA_REMAPPED 0           /* remap_copy: done by remapping pages, nothing to copy */
#define DEVICE_WIDE_STREAM (-1)   /* cudaFree: ordered after earlier work on every stream */

struct entry_table {
    int32_t table_size;    /* in: sizeof(struct entry_table), so Java refuses a mismatched shim */
    int32_t monitor_mode;  /* in: 1 = memory comes from the real runtime, Java only records */
    int32_t owns_jvm;      /* in: 1 = this shim created the JVM (0: attached to a host JVM) */
    int32_t reserved;
    /* out: address > 0, 0 for size 0, or -cudaError, or JAVA_PASS_THROUGH */
    int64_t (*allocate)(int64_t size, int32_t device, int64_t stream);
    /* out: JAVA_FREED, JAVA_NOT_OURS or -cudaError */
    int32_t (*release)(int64_t address, int32_t device, int64_t stream);
    void (*record_alloc)(int64_t address, int64_t size, int64_t stream); /* monitor mode */
    void (*record_free)(int64_t address, int64_t stream);                /* monitor mode */
    /* writes stats, trace, and (exit status 0) the peak profile */
    void (*at_exit)(int64_t passthrough_calls, int32_t exit_status);
    /* after the runtime agreed: device gets (enable 1) or loses (0) access to peer's memory; 0 or -cudaError */
    int32_t (*peer_access)(int32_t device, int32_t peer, int32_t enable);
    /* 0 (handle written), JAVA_NOT_OURS, or -cudaError */
    int32_t (*ipc_get_handle)(int64_t address, int32_t device, int64_t handle_out);
    /* pointer, JAVA_PASS_THROUGH (not a vmmkit handle), or -cudaError */
    int64_t (*ipc_open)(int64_t handle_in, int32_t device);
    /* JAVA_FREED, JAVA_NOT_OURS (not opened by vmmkit), or -cudaError */
    int32_t (*ipc_close)(int64_t address);
    /* out: the resized allocation's address, or -cudaError */
    int64_t (*reallocate)(int64_t address, int64_t size, int32_t device, int64_t stream);
    /* out: JAVA_REMAPPED, or anything else: make the copy */
    int32_t (*remap_copy)(int64_t dst, int64_t src, int64_t count, int32_t device, int64_t stream);
    /* memory tags (vmmkit_regions.c): 0 or -cudaError; a tag is a NUL-terminated string, 0 = every tag */
    int32_t (*region_begin)(int64_t tag, int32_t keep_contents, int32_t device);
    int32_t (*region_end)(int32_t device);
    int32_t (*pause)(int64_t tag, int32_t device);
    int32_t (*resume)(int64_t tag, int32_t device);
};

extern struct entry_table java;
extern int monitor_mode;

/* True when Java is up; starts it on the first call. Forked children and the thread starting
 * the JVM never wait for it. */
int java_up(void);
int current_device(void);          /* the runtime's current device, 0 when it cannot say */

#endif
