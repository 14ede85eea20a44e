package dev.vmmkit.driver.cuda;

import dev.vmmkit.driver.CallText;
import static dev.vmmkit.driver.cuda.CudaErrors.failure;
import static dev.vmmkit.driver.CallText.hex;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

import dev.vmmkit.driver.CallText;
import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.OtherProcesses;
import dev.vmmkit.driver.StreamEvents;
import dev.vmmkit.driver.VmmDriver;
import dev.vmmkit.driver.DeviceBytes;
import dev.vmmkit.driver.DeviceBytesProvider;
import dev.vmmkit.driver.DeviceCopies;

/**
 * {@link VmmDriver} on the real CUDA driver ({@code libcuda.so.1}), called through the FFM API.
 *
 * <p>Use {@link #isAvailable()} to ask whether a GPU is usable here, and {@link #open(int)} to get
 * a driver for one device. Every call:
 * <ol>
 *   <li>fails with CUDA_ERROR_DEINITIALIZED once {@link #close()} ran;</li>
 *   <li>makes the device's primary context current if the thread has none, and for a call bound to a
 *       context (streams, events, synchronisation) while another device's is current, for that call
 *       alone (see {@link PrimaryContext});</li>
 *   <li>passes out-parameters through per-thread scratch memory and the two structs prebuilt at
 *       open, so it allocates nothing on success;</li>
 *   <li>turns a non-zero CUresult into a {@link DriverException} naming the call and its arguments.</li>
 * </ol>
 * {@link #mapWithAccess} is the interface's default (map, set access, undo the map on failure).
 */
public final class CudaDriver implements VmmDriver, DeviceBytesProvider, DeviceCopies {

    /** Prop and access descriptor live as long as the driver object; the GC frees them after. */
    private final Arena structs = Arena.ofAuto();
    private final int ordinal;
    private final int cuDevice;
    private final PrimaryContext context;
    private final MemorySegment exportableProp;
    private final MemorySegment plainProp;
    /** The prop cuMemCreate uses: exportable while the device accepts it, else plain (see create). */
    private volatile MemorySegment allocationProp;
    private final MemorySegment readWriteAccess;
    private final long granularity;
    private volatile boolean handlesExportable;
    private final CudaEvents events;
    private final NvmlProcesses.OnFirstRead otherProcesses;
    private final CudaTransfers transfers = new CudaTransfers(this);
    /** Code that keeps resources in the context (kernel modules, cuBLAS); closed before the context goes. */
    private final List<AutoCloseable> contextUsers = new CopyOnWriteArrayList<>();
    private volatile boolean closed;

    /**
     * Whether handles are made exportable (POSIX descriptors, for CUDA IPC) where the device can;
     * the system property {@code vmmkit.cuda.exportable=false} makes plain ones, for
     * {@code scripts/gpu/cold-path.sh} and {@code pause-resume.sh} to measure what exportability
     * costs in cuMemCreate and cuMemRelease.
     */
    private static final boolean EXPORTABLE_WANTED = !"false".equals(System.getProperty("vmmkit.cuda.exportable"));

    private CudaDriver(int ordinal, int cuDevice, PrimaryContext context) {
        this.ordinal = ordinal;
        this.cuDevice = cuDevice;
        this.otherProcesses = new NvmlProcesses.OnFirstRead(cuDevice);
        this.context = context;
        this.handlesExportable = EXPORTABLE_WANTED && queryPosixDescriptorSupport();
        this.plainProp = CudaLayouts.allocationProp(structs, ordinal, false);
        this.exportableProp = CudaLayouts.allocationProp(structs, ordinal, true);
        this.allocationProp = handlesExportable ? exportableProp : plainProp;
        this.readWriteAccess = CudaLayouts.readWriteAccess(structs, ordinal);
        this.granularity = queryGranularity();
        this.events = new CudaEvents(this);
    }

    /** True when libcuda loads, cuInit succeeds and at least one device is visible. Never throws. */
    public static boolean isAvailable() {
        try {
            return CudaApi.isLoaded()
                    && CudaApi.cuInit(0) == CudaResult.SUCCESS
                    && deviceCount() > 0;
        } catch (RuntimeException e) {
            return false;
        }
    }

    /**
     * Opens device {@code device} (a CUDA ordinal, as CUDA_VISIBLE_DEVICES numbers them): loads the
     * driver, checks the ordinal and retains the device's primary context.
     *
     * @throws DriverException CUDA_ERROR_NO_DEVICE when there is no driver or no GPU,
     *         CUDA_ERROR_INVALID_DEVICE for a bad ordinal, or whatever cuInit reports
     */
    public static CudaDriver open(int device) {
        String call = "open(device=" + device + ")";
        if (!CudaApi.isLoaded()) {
            throw new DriverException(CudaResult.NO_DEVICE,
                    CudaApi.LIBRARY + " not found: no NVIDIA driver on this machine (" + CudaApi.loadFailure() + ")",
                    call);
        }
        int result = CudaApi.cuInit(0);
        if (result != CudaResult.SUCCESS) {
            throw failure(result, CallText.init());
        }
        int count = deviceCount();
        if (count == 0) {
            throw new DriverException(CudaResult.NO_DEVICE, "the NVIDIA driver sees no CUDA device", call);
        }
        if (device < 0 || device >= count) {
            throw new DriverException(CudaResult.INVALID_DEVICE,
                    "invalid device ordinal: " + count + " device(s) visible, numbered 0.." + (count - 1), call);
        }
        CudaScratch scratch = CudaScratch.get();
        result = CudaApi.cuDeviceGet(scratch.first, device);
        if (result != CudaResult.SUCCESS) {
            throw failure(result, CallText.deviceGet(device));
        }
        int cuDevice = scratch.firstInt();
        PrimaryContext context = PrimaryContext.retain(cuDevice);
        try {
            return new CudaDriver(device, cuDevice, context);
        } catch (RuntimeException e) {
            try {
                context.release();
            } catch (RuntimeException releaseFailure) {
                e.addSuppressed(releaseFailure);
            }
            throw e;
        }
    }

    /** Number of CUDA devices the driver sees (after cuInit). */
    public static int deviceCount() {
        CudaScratch scratch = CudaScratch.get();
        int result = CudaApi.cuDeviceGetCount(scratch.first);
        if (result != CudaResult.SUCCESS) {
            throw failure(result, CallText.deviceGetCount());
        }
        return scratch.firstInt();
    }

    /**
     * The CUcontext current on the calling thread (0 when none): one trivial driver call, used by
     * diagnostics and by the benchmark to show the cost of an FFM call.
     */
    public long currentContext() {
        return PrimaryContext.current();
    }

    /** The retained primary context of this driver's device. */
    public long primaryContext() {
        return context.handle();
    }

    @Override
    public String name() {
        return "cuda";
    }

    @Override
    public int device() {
        return ordinal;
    }

    @Override
    public long granularity() {
        return granularity;
    }

    @Override
    public long reserve(long size, long alignment) {
        prepare("cuMemAddressReserve");
        CudaScratch scratch = CudaScratch.get();
        long align = alignment == 0 ? granularity : alignment;
        int result = CudaApi.cuMemAddressReserve(scratch.first, size, align, 0L, 0L);
        if (result != CudaResult.SUCCESS) {
            throw failure(result, CallText.reserve(size, align));
        }
        return scratch.firstLong();
    }

    @Override
    public void addressFree(long va, long size) {
        prepare("cuMemAddressFree");
        int result = CudaApi.cuMemAddressFree(va, size);
        if (result != CudaResult.SUCCESS) {
            throw failure(result, CallText.addressFree(va, size));
        }
    }

    @Override
    public long create(long size, boolean exportable) {
        prepare("cuMemCreate");
        CudaScratch scratch = CudaScratch.get();
        MemorySegment prop = exportable ? allocationProp : plainProp;
        int result = CudaApi.cuMemCreate(scratch.first, size, prop, 0L);
        if (result != CudaResult.SUCCESS && result != CudaResult.OUT_OF_MEMORY && prop == exportableProp) {
            // Some set-ups (containers, MIG) refuse exportable handles although the device reports
            // support: make plain handles from now on, as PyTorch's expandable segments do.
            result = CudaApi.cuMemCreate(scratch.first, size, plainProp, 0L);
            if (result == CudaResult.SUCCESS) {
                handlesExportable = false;
                allocationProp = plainProp;
            }
        }
        if (result != CudaResult.SUCCESS) {
            throw failure(result, CallText.create(size, ordinal, exportable));
        }
        return scratch.firstLong();
    }

    @Override
    public void release(long handle) {
        prepare("cuMemRelease");
        int result = CudaApi.cuMemRelease(handle);
        if (result != CudaResult.SUCCESS) {
            throw failure(result, CallText.release(handle));
        }
    }

    @Override
    public void map(long va, long size, long handle) {
        prepare("cuMemMap");
        int result = CudaApi.cuMemMap(va, size, 0L, handle, 0L);
        if (result != CudaResult.SUCCESS) {
            throw failure(result, CallText.map(va, size, handle));
        }
    }

    @Override
    public void setAccess(long va, long size) {
        prepare("cuMemSetAccess");
        int result = CudaApi.cuMemSetAccess(va, size, readWriteAccess, 1L);
        if (result != CudaResult.SUCCESS) {
            throw failure(result, CallText.setAccess(va, size, ordinal));
        }
    }

    @Override
    public void setAccess(long va, long size, long grant, long revoke) {
        prepare("cuMemSetAccess");
        if ((grant & revoke) != 0) {
            throw new DriverException(CudaResult.INVALID_VALUE, "devices both granted and revoked",
                    CallText.setAccess(va, size, grant, revoke));
        }
        int result;
        // A peer grant is rare (per mapped run, when access changes): a small arena per call is fine.
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment descs = CudaLayouts.accessDescriptors(arena, grant, revoke);
            result = CudaApi.cuMemSetAccess(va, size, descs, Long.bitCount(grant) + Long.bitCount(revoke));
        }
        if (result != CudaResult.SUCCESS) {
            throw failure(result, CallText.setAccess(va, size, grant, revoke));
        }
    }

    /** True when the device exports memory as POSIX descriptors; then handles created exportable are. */
    @Override
    public boolean canExport() {
        return handlesExportable;
    }

    @Override
    public int exportHandle(long handle) {
        prepare("cuMemExportToShareableHandle");
        if (!handlesExportable) {
            return VmmDriver.super.exportHandle(handle);
        }
        CudaScratch scratch = CudaScratch.get();
        int result = CudaApi.cuMemExportToShareableHandle(scratch.first, handle,
                CudaLayouts.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0L);
        if (result != CudaResult.SUCCESS) {
            throw failure(result, CallText.exportHandle(handle));
        }
        return scratch.firstInt();
    }

    @Override
    public long importHandle(int fd, long size) {
        prepare("cuMemImportFromShareableHandle");
        CudaScratch scratch = CudaScratch.get();
        int result = CudaApi.cuMemImportFromShareableHandle(scratch.first, fd,
                CudaLayouts.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        if (result != CudaResult.SUCCESS) {
            throw failure(result, CallText.importHandle(fd, size));
        }
        return scratch.firstLong();
    }

    @Override
    public void unmap(long va, long size) {
        prepare("cuMemUnmap");
        int result = CudaApi.cuMemUnmap(va, size);
        if (result != CudaResult.SUCCESS) {
            throw failure(result, CallText.unmap(va, size));
        }
    }

    /** Through NVML, opened at the first call; {@link OtherProcesses#NONE} without it. */
    @Override
    public OtherProcesses otherProcesses() {
        return otherProcesses.read();
    }

    @Override
    public MemoryInfo memoryInfo() {
        long previous = enter("cuMemGetInfo_v2"); // the figures of the current context's device
        try {
            CudaScratch scratch = CudaScratch.get();
            int result = CudaApi.cuMemGetInfo(scratch.first, scratch.second);
            if (result != CudaResult.SUCCESS) {
                throw failure(result, CallText.memoryInfo());
            }
            return new MemoryInfo(scratch.firstLong(), scratch.secondLong());
        } finally {
            leave(previous);
        }
    }

    @Override
    public StreamEvents events() {
        return events;
    }

    /** Releases the primary context retained at open. Idempotent; later calls fail with DEINITIALIZED. */
    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            try {
                closeContextUsers(); // they need the driver still open
            } finally {
                closed = true;
            }
        }
        context.release();
    }

    void addContextUser(AutoCloseable user) {
        contextUsers.add(user);
    }

    void removeContextUser(AutoCloseable user) {
        contextUsers.remove(user);
    }

    /** Closes every context user, newest first; the first failure is thrown, later ones suppressed by it. */
    private void closeContextUsers() {
        RuntimeException failure = null;
        for (AutoCloseable user : contextUsers.reversed()) {
            try {
                user.close();
            } catch (Exception e) {
                RuntimeException wrapped = e instanceof RuntimeException r ? r
                        : new IllegalStateException("closing " + user + " failed", e);
                if (failure == null) failure = wrapped;
                else failure.addSuppressed(wrapped);
            }
        }
        contextUsers.clear();
        if (failure != null) throw failure;
    }

    @Override
    public String toString() {
        return "CudaDriver[device=" + ordinal + ", cuDevice=" + cuDevice + ", granularity=" + hex(granularity) + "]";
    }

    /** Pinned host memory and asynchronous host copies ({@link CudaTransfers}). */
    @Override
    public dev.vmmkit.driver.HostTransfers transfers() {
        return transfers;
    }

    /** Checks the driver is open and the thread has a context; {@code function} names the call refused. */
    void prepare(String function) {
        checkOpen(function);
        context.makeCurrentIfNone();
    }

    /**
     * For a call bound to this device's context: checks as {@link #prepare} and makes the context
     * current for the call; returns what {@link #leave} puts back after it ({@link PrimaryContext#enter}).
     */
    long enter(String function) {
        checkOpen(function);
        return context.enter();
    }

    /** Puts back the context current before {@link #enter}. */
    void leave(long previous) {
        context.leave(previous);
    }

    private void checkOpen(String function) {
        if (closed) {
            throw DriverException.of(CudaResult.DEINITIALIZED, function + ": driver for device " + ordinal + " is closed");
        }
    }

    /** CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED; false when the query fails. */
    private boolean queryPosixDescriptorSupport() {
        prepare("cuDeviceGetAttribute");
        CudaScratch scratch = CudaScratch.get();
        int result = CudaApi.cuDeviceGetAttribute(scratch.first,
                CudaLayouts.CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, cuDevice);
        return result == CudaResult.SUCCESS && scratch.firstInt() != 0;
    }

    private long queryGranularity() {
        prepare("cuMemGetAllocationGranularity");
        CudaScratch scratch = CudaScratch.get();
        int result = CudaApi.cuMemGetAllocationGranularity(scratch.first, allocationProp,
                CudaLayouts.CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
        if (result != CudaResult.SUCCESS) {
            throw failure(result, CallText.granularity(ordinal));
        }
        long value = scratch.firstLong();
        if (value <= 0 || Long.bitCount(value) != 1) {
            throw new DriverException(CudaResult.UNKNOWN, "granularity " + value + " is not a power of two",
                    CallText.granularity(ordinal));
        }
        return value;
    }

    /** Byte access for conformance checks and verification, through cuMemcpyHtoD/DtoH. */
    @Override
    public DeviceBytes deviceBytes() {
        return new CudaMemcpy(this);
    }

    /** cuMemcpyDtoDAsync_v2 on {@code stream}. */
    @Override
    public void copy(long dst, long src, long bytes, long stream) {
        prepare("cuMemcpyDtoDAsync_v2");
        int result = CudaApi.cuMemcpyDtoDAsync(dst, src, bytes, stream);
        if (result != CudaResult.SUCCESS) {
            throw failure(result, "cuMemcpyDtoDAsync_v2(dst=" + hex(dst) + ", src=" + hex(src) + ", bytes=" + hex(bytes)
                    + ", stream=" + hex(stream) + ")");
        }
    }
}
