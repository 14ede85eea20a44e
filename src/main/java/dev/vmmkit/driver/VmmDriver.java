package dev.vmmkit.driver;

/**
 * The one place that talks to a driver: CUDA's virtual memory API, or its host emulation.
 *
 * <p>Addresses, sizes and handles are plain {@code long}s so that callers allocate nothing.
 * Every failure is a {@link DriverException}; nothing here returns an error code.
 * Sizes and addresses must be multiples of {@link #granularity()}.
 *
 * <p>Implementations are thread-safe. Behaviour such as counting, logging and fault injection is
 * added by wrapping a driver in an adaptor ({@link CountingDriver}, {@link LoggingDriver},
 * {@link FaultInjectingDriver}), never by changing the implementation.
 */
public interface VmmDriver extends AutoCloseable {

    /** Short name for messages and reports: "cuda" or "host". */
    String name();

    /** The device ordinal this driver allocates on. */
    int device();

    /** Allocation granularity in bytes (a power of two; 2 MiB on current GPUs). */
    long granularity();

    /** Reserves {@code size} bytes of virtual address space aligned to {@code alignment} (0 = granularity). */
    long reserve(long size, long alignment);

    /** Frees a whole reservation made by {@link #reserve}. */
    void addressFree(long va, long size);

    /**
     * Creates a physical allocation of {@code size} bytes on {@link #device()}; returns its handle,
     * exportable when the driver {@link #canExport() can export}.
     */
    default long create(long size) {
        return create(size, true);
    }

    /**
     * Creates a physical allocation of {@code size} bytes on {@link #device()}; returns its handle.
     * With {@code exportable} false the handle is plain: {@link #exportHandle} refuses it. CUDA
     * creates and releases plain handles faster (no shareable handle type is requested), which is
     * what memory that is given back and made again often wants; with {@code exportable} true the
     * handle is exportable when the driver can export.
     */
    long create(long size, boolean exportable);

    /** Releases a handle. Memory that is still mapped stays valid until its last unmap. */
    void release(long handle);

    /** Maps the whole of {@code handle} ({@code size} bytes) at {@code va}. No access is granted yet. */
    void map(long va, long size, long handle);

    /** Grants read/write access to {@link #device()} over a mapped range. */
    void setAccess(long va, long size);

    /**
     * Changes which devices may read and write a mapped range (same range rules as
     * {@link #setAccess(long, long)}): each device in {@code grant} gets read/write access, each
     * device in {@code revoke} loses it, every other device keeps what it had. Both are
     * {@link DeviceSet}s and must not overlap. This is how a mapping is shared with a peer device
     * (CUDA: one cuMemSetAccess with one descriptor per device named). A driver that knows no
     * other device supports only granting its own.
     */
    default void setAccess(long va, long size, long grant, long revoke) {
        if (grant == DeviceSet.of(device()) && revoke == DeviceSet.NONE) {
            setAccess(va, size);
            return;
        }
        throw new DriverException(CudaResult.NOT_SUPPORTED, CudaResult.describe(CudaResult.NOT_SUPPORTED)
                + ": this driver knows no other device", CallText.setAccess(va, size, grant, revoke));
    }

    /** True when {@link #exportHandle} works: handles are made shareable with other processes. */
    default boolean canExport() {
        return false;
    }

    /**
     * A POSIX file descriptor that stands for the physical memory of {@code handle}; another process
     * that gets the descriptor (e.g. with {@code pidfd_getfd}) imports it with {@link #importHandle}.
     * The caller owns the descriptor and closes it; the memory lives while a handle or a descriptor
     * of it does. CUDA: cuMemExportToShareableHandle(POSIX_FILE_DESCRIPTOR).
     */
    default int exportHandle(long handle) {
        throw new DriverException(CudaResult.NOT_SUPPORTED, CudaResult.describe(CudaResult.NOT_SUPPORTED)
                + ": this driver's handles are not exportable", CallText.exportHandle(handle));
    }

    /**
     * A handle of this driver over the memory that {@code fd} (from {@link #exportHandle}, maybe of
     * another process) stands for, {@code size} bytes; mapped and released like any handle. The
     * descriptor stays the caller's. CUDA: cuMemImportFromShareableHandle(POSIX_FILE_DESCRIPTOR).
     */
    default long importHandle(int fd, long size) {
        throw new DriverException(CudaResult.NOT_SUPPORTED, CudaResult.describe(CudaResult.NOT_SUPPORTED)
                + ": this driver cannot import handles", CallText.importHandle(fd, size));
    }

    /** Unmaps a range made of whole mappings; it goes back to plain reserved space. */
    void unmap(long va, long size);

    /**
     * Map plus set access as one step: if set access fails the map is undone before the exception
     * leaves, so no half-mapped range ever exists. Adaptors inherit this method rather than
     * forwarding it, so their own {@code map}/{@code setAccess}/{@code unmap} are the ones used.
     */
    default void mapWithAccess(long va, long size, long handle) {
        map(va, size, handle);
        try {
            setAccess(va, size);
        } catch (DriverException accessFailure) {
            try {
                unmap(va, size);
            } catch (DriverException rollbackFailure) {
                accessFailure.addSuppressed(rollbackFailure);
            }
            throw accessFailure;
        }
    }

    /** Free and total device memory as the driver reports them. */
    MemoryInfo memoryInfo();

    /**
     * Device memory that other processes hold on {@link #device()} now, so that this process's own
     * share of {@link #memoryInfo()}'s memory in use can be told from theirs when jobs share a GPU.
     * {@link OtherProcesses#NONE} when the driver cannot list them. Not for the hot path: it may
     * ask a management library (CUDA: NVML).
     */
    default OtherProcesses otherProcesses() {
        return OtherProcesses.NONE;
    }

    /** Events for stream-ordered reuse. Kept apart because the hot path never calls them. */
    StreamEvents events();

    /**
     * Pinned host memory and stream-ordered copies between it and device memory, for the one
     * allocator operation that keeps contents off the device (pausing a tag). Kept apart from the
     * memory calls, like {@link #events()}.
     *
     * @throws DriverException CUDA_ERROR_NOT_SUPPORTED when the driver has none
     */
    default HostTransfers transfers() {
        throw DriverException.of(CudaResult.NOT_SUPPORTED, "transfers(): driver '" + name() + "' has no host transfers");
    }

    /** Releases the driver's own resources. Any later call fails with {@link CudaResult#DEINITIALIZED}. */
    @Override
    void close();

    /** Free and total bytes of device memory. */
    record MemoryInfo(long freeBytes, long totalBytes) {
    }
}
