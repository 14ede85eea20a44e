package dev.vmmkit.interpose;

import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.core.InvalidAddressException;
import dev.vmmkit.core.ManagedMemoryResource;
import dev.vmmkit.core.OutOfDeviceMemoryException;
import dev.vmmkit.core.RemapLostPagesException;
import dev.vmmkit.core.SharedPages;
import dev.vmmkit.core.TagPausedException;
import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.ipc.IpcException;
import dev.vmmkit.ipc.IpcExports;
import dev.vmmkit.ipc.IpcImports;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The calls the native shim ({@code src/main/c/}) makes, through FFM upcall stubs.
 * Primitive arguments only, and no method ever throws: an exception leaving an upcall would end the
 * host process. Results use the CUDA runtime's own error codes, negated.
 *
 * <h2>Streams</h2>
 * {@code cudaMallocAsync}/{@code cudaFreeAsync} pass their stream. {@code cudaMalloc} passes stream 0.
 * {@code cudaFree} passes {@link DeviceMemoryResource#DEVICE_WIDE_STREAM} (-1): the real cudaFree synchronises the whole device,
 * so the program may free memory that work on any stream still uses. The allocator must not hand such
 * memory to a later allocation until all work queued before the free, on every stream (non-blocking
 * ones included), has finished, and the freeing thread must not wait for it: the memory waits for a
 * device synchronisation that vmmkit runs on a thread of its own.
 *
 * <p>Requests are recorded ({@code vmmkit run --trace}) by a {@link dev.vmmkit.trace.RecordingResource}
 * around each device's allocator; this class only translates calls and results.
 */
public final class InterposedCalls {
    /** {@link #allocate}: vmmkit cannot serve the call; the shim uses the real runtime. */
    public static final long PASS_THROUGH = -1000;
    /** {@link #release}: vmmkit took the pointer back. */
    public static final int FREED = 0;
    /** {@link #release}: not a vmmkit pointer; the shim gives it to the real runtime. */
    public static final int NOT_OURS = 1;
    /** {@link #remapCopy}: the copy was done by remapping pages; the shim returns success. */
    public static final int REMAPPED = 0;
    /** {@link #remapCopy}: the shim must make the copy through the real runtime. */
    public static final int COPY_IT_YOURSELF = 1;

    static final int CUDA_ERROR_INVALID_VALUE = 1;
    static final int CUDA_ERROR_MEMORY_ALLOCATION = 2;
    static final int CUDA_ERROR_INVALID_DEVICE = 101;
    static final int CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217;
    static final int CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900;
    static final int CUDA_ERROR_UNKNOWN = 999;
    private static final long IPC_HANDLE_BYTES = 64;

    private static volatile InterposeSession session;

    private InterposedCalls() {
    }

    static void install(InterposeSession newSession) {
        session = newSession;
    }

    static InterposeSession session() {
        return session;
    }

    /** The address of {@code size} bytes on {@code device}; 0 for size 0; else -cudaError or {@link #PASS_THROUGH}. */
    public static long allocate(long size, int device, long stream) {
        FirstCalls first = session.firstCalls;
        if (first == null || !first.wants(size)) return allocateOnce(size, device, stream);
        first.begin(FirstCalls.Kind.LARGE_ALLOCATION, device);
        try {
            return allocateOnce(size, device, stream);
        } finally {
            first.end(FirstCalls.Kind.LARGE_ALLOCATION, size);
        }
    }

    private static long allocateOnce(long size, int device, long stream) {
        try {
            InterposeSession s = session;
            ManagedMemoryResource resource = s.managers.forDevice(device);
            if (resource == null) return PASS_THROUGH;
            s.tagRegions.applyTo(device, resource.tagControl());
            try {
                return resource.allocate(size, stream);
            } catch (OutOfDeviceMemoryException full) {
                // Memory freed while another process had it open may be free now.
                if (s.exports.completeClosedFrees(true) == 0) throw full;
                return resource.allocate(size, stream);
            }
        } catch (OutOfDeviceMemoryException e) {
            InterposeLog.info("device " + device + ": " + e.getMessage());
            return -CUDA_ERROR_MEMORY_ALLOCATION;
        } catch (TagPausedException e) {
            TagCalls.refused(e);
            return -CUDA_ERROR_MEMORY_ALLOCATION;
        } catch (IllegalArgumentException e) {
            return -CUDA_ERROR_INVALID_VALUE;
        } catch (Throwable e) {
            InterposeLog.warnOnce("allocate", "allocation failed inside vmmkit; using the CUDA runtime", e);
            return PASS_THROUGH;
        }
    }

    /**
     * {@link #FREED}, {@link #NOT_OURS}, or -cudaError. {@code device} is where to look first, or -1:
     * the owner is found by address.
     */
    public static int release(long address, int device, long stream) {
        InterposeSession s = session;
        ManagedMemoryResource owner;
        try {
            owner = s.managers.owner(address, device);
        } catch (Throwable e) {
            InterposeLog.warnOnce("owns", "ownership check failed inside vmmkit", e);
            return NOT_OURS;
        }
        if (owner == null) return NOT_OURS;
        try {
            s.exports.completeClosedFrees(false); // returns at once unless frees wait for importers
            if (s.exports.mayHold(address)) {
                int held = s.exports.deferFree(address, stream, owner);
                if (held == IpcExports.DEFERRED) return FREED; // another process has it open
                if (held == IpcExports.ALREADY_FREED) return -CUDA_ERROR_INVALID_VALUE;
            }
            owner.deallocate(address, stream);
            return FREED;
        } catch (InvalidAddressException e) {
            return -CUDA_ERROR_INVALID_VALUE; // e.g. two threads freeing one pointer
        } catch (Throwable e) {
            // The pointer is ours: the runtime would refuse it. Leaking it keeps the program running.
            InterposeLog.warnOnce("release", "free failed inside vmmkit; the memory is leaked", e);
            return FREED;
        }
    }

    /**
     * {@code vmmkit_realloc}: the address of the resized allocation, or -cudaError. A pointer that no
     * device's allocator handed out is {@code cudaErrorInvalidValue} and nothing happens. The old
     * memory is freed as cudaFree frees ({@link DeviceMemoryResource#DEVICE_WIDE_STREAM}), the copy (if any) runs on the
     * default stream.
     */
    public static long reallocate(long address, long size, int device, long stream) {
        ManagedMemoryResource owner;
        try {
            owner = session.managers.owner(address, device);
        } catch (Throwable e) {
            InterposeLog.warnOnce("owns", "ownership check failed inside vmmkit", e);
            return -CUDA_ERROR_INVALID_VALUE;
        }
        if (owner == null || size <= 0) return -CUDA_ERROR_INVALID_VALUE;
        try {
            return owner.reallocate(address, size, stream);
        } catch (OutOfDeviceMemoryException e) {
            InterposeLog.info("device " + device + ": " + e.getMessage());
            return -CUDA_ERROR_MEMORY_ALLOCATION;
        } catch (IllegalArgumentException e) { // an InvalidAddressException too: not the start of a live allocation
            return -CUDA_ERROR_INVALID_VALUE;
        } catch (Throwable e) {
            InterposeLog.warnOnce("reallocate", "resize failed inside vmmkit; the allocation is unchanged", e);
            return -CUDA_ERROR_MEMORY_ALLOCATION;
        }
    }

    /**
     * cudaDeviceEnablePeerAccess ({@code enable} 1) or cudaDeviceDisablePeerAccess (0), called on
     * {@code device} for {@code peer}, after the real runtime accepted it: device {@code device} gets
     * (or loses) access to every vmmkit allocation of {@code peer}. 0 or -cudaError.
     */
    public static int peerAccess(int device, int peer, int enable) {
        try {
            session.managers.enablePeer(device, peer, enable != 0);
            return 0;
        } catch (IllegalArgumentException e) {
            return -CUDA_ERROR_INVALID_DEVICE;
        } catch (DriverException e) {
            InterposeLog.info("peer access " + device + " -> " + peer + ": " + e.getMessage());
            return e.result() == CudaResult.OUT_OF_MEMORY ? -CUDA_ERROR_MEMORY_ALLOCATION
                    : e.result() == CudaResult.INVALID_DEVICE || e.result() == CudaResult.NOT_SUPPORTED
                    ? -CUDA_ERROR_PEER_ACCESS_UNSUPPORTED : -CUDA_ERROR_UNKNOWN;
        } catch (Throwable e) {
            InterposeLog.warnOnce("peer", "peer access failed inside vmmkit", e);
            return -CUDA_ERROR_UNKNOWN;
        }
    }

    /**
     * An interposed device-to-device copy (VMM_ZERO_COPY=1): {@link #REMAPPED} when it was done by
     * remapping pages, {@link #COPY_IT_YOURSELF}, or -cudaError when the remap failed and left the
     * destination without pages, where a copy would fault the device. Both pointers must belong to
     * one allocator.
     */
    public static int remapCopy(long dst, long src, long count, int device, long stream) {
        try {
            ManagedMemoryResource owner = session.managers.owner(dst, device);
            if (owner == null || !owner.owns(src)) return COPY_IT_YOURSELF;
            return owner.remapCopy(dst, src, count, stream) ? REMAPPED : COPY_IT_YOURSELF;
        } catch (RemapLostPagesException e) {
            InterposeLog.warnOnce("remap-lost-pages", "device " + device + ": cudaMemcpy failed", e);
            return -(e.isOutOfMemory() ? CUDA_ERROR_MEMORY_ALLOCATION : CUDA_ERROR_UNKNOWN);
        } catch (Throwable e) {
            InterposeLog.warnOnce("remap", "remap failed inside vmmkit; copying instead", e);
            return COPY_IT_YOURSELF;
        }
    }

    /**
     * cudaIpcGetMemHandle: writes the 64-byte handle of the vmmkit allocation starting at
     * {@code address} to {@code handleOut}. 0, {@link #NOT_OURS}, or -cudaError.
     */
    public static int ipcGetHandle(long address, int device, long handleOut) {
        try {
            InterposeSession s = session;
            ManagedMemoryResource owner = s.managers.owner(address, device);
            SharedPages pages = owner == null ? null : owner.sharedPages();
            if (pages == null) return NOT_OURS;
            s.exports.completeClosedFrees(false);
            s.exports.handleFor(address, pages, MemorySegment.ofAddress(handleOut).reinterpret(IPC_HANDLE_BYTES));
            return 0;
        } catch (IpcException e) {
            InterposeLog.info("cudaIpcGetMemHandle: " + e.getMessage());
            return -e.cudaError();
        } catch (Throwable e) {
            InterposeLog.warnOnce("ipc-get", "cudaIpcGetMemHandle failed inside vmmkit", e);
            return -CUDA_ERROR_UNKNOWN;
        }
    }

    /**
     * cudaIpcOpenMemHandle of the handle at {@code handleIn}, on {@code device}: the pointer, or
     * {@link #PASS_THROUGH} for a handle vmmkit did not make, or -cudaError.
     */
    public static long ipcOpen(long handleIn, int device) {
        try {
            InterposeSession s = session;
            MemorySegment handle = MemorySegment.ofAddress(handleIn).reinterpret(IPC_HANDLE_BYTES);
            if (!IpcImports.isVmmkitHandle(handle)) return PASS_THROUGH;
            ManagedMemoryResource resource = s.managers.forDevice(device);
            SharedPages pages = resource == null ? null : resource.sharedPages();
            if (pages == null) return -IpcException.MAP_FAILED;
            return s.imports.open(handle, pages);
        } catch (IpcException e) {
            InterposeLog.info("cudaIpcOpenMemHandle: " + e.getMessage());
            return -e.cudaError();
        } catch (Throwable e) {
            InterposeLog.warnOnce("ipc-open", "cudaIpcOpenMemHandle failed inside vmmkit", e);
            return -IpcException.MAP_FAILED;
        }
    }

    /** cudaIpcCloseMemHandle: {@link #FREED}, {@link #NOT_OURS} (not opened by vmmkit), or -cudaError. */
    public static int ipcClose(long address) {
        try {
            InterposeSession s = session;
            return s.imports.close(address) ? FREED : NOT_OURS;
        } catch (IpcException e) {
            InterposeLog.info("cudaIpcCloseMemHandle: " + e.getMessage());
            return -e.cudaError();
        } catch (Throwable e) {
            InterposeLog.warnOnce("ipc-close", "cudaIpcCloseMemHandle failed inside vmmkit", e);
            return -CUDA_ERROR_UNKNOWN;
        }
    }

    /**
     * cuMemGetAddressRange and the range attributes of cuPointerGetAttribute: writes the first
     * address and the size of the vmmkit allocation holding {@code address} to the two 64-bit
     * integers at {@code out}. 0, or {@link #NOT_OURS} (the driver answers).
     */
    public static int addressRange(long address, int device, long out) {
        try {
            ManagedMemoryResource owner = session.managers.owner(address, device);
            long base = owner == null ? -1 : owner.liveAllocationHolding(address);
            long size = base < 0 ? -1 : owner.sizeOf(base);
            if (size < 0) return NOT_OURS;
            MemorySegment range = MemorySegment.ofAddress(out).reinterpret(2 * Long.BYTES);
            range.set(ValueLayout.JAVA_LONG, 0, base);
            range.set(ValueLayout.JAVA_LONG, Long.BYTES, size);
            return 0;
        } catch (Throwable e) {
            InterposeLog.warnOnce("range", "address range lookup failed inside vmmkit", e);
            return NOT_OURS;
        }
    }

    /** Monitor mode: the real runtime allocated {@code address}. */
    public static void recordAlloc(long address, long size, long stream) {
        try {
            InterposeSession s = session;
            s.ledger.allocated(address, size);
            s.recorder.allocated(address, size, stream);
        } catch (Throwable e) {
            InterposeLog.warnOnce("record", "cannot record an allocation", e);
        }
    }

    /** Monitor mode: the program is about to free {@code address} through the real runtime. */
    public static void recordFree(long address, long stream) {
        try {
            InterposeSession s = session;
            long size = s.ledger.freed(address);
            if (size >= 0) s.recorder.freed(address, size, stream);
        } catch (Throwable e) {
            InterposeLog.warnOnce("record", "cannot record a free", e);
        }
    }

    /**
     * The host process is exiting with {@code exitStatus}: write the stats file, finish the trace and,
     * when the status is 0, save the peak profile.
     */
    public static void atExit(long passthroughCalls, int exitStatus) {
        try {
            InterposeSession s = session;
            if (s != null) s.finish(passthroughCalls, exitStatus);
        } catch (Throwable e) {
            InterposeLog.warnOnce("exit", "cannot finish", e);
        }
    }
}
