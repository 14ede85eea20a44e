package dev.vmmkit.driver.host;

import dev.vmmkit.driver.CallText;
import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DeviceCopies;
import dev.vmmkit.driver.DeviceBytes;
import dev.vmmkit.driver.DeviceBytesProvider;
import dev.vmmkit.driver.DeviceSet;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.LibC;
import dev.vmmkit.driver.VmmDriver;

/**
 * CUDA's virtual memory API emulated on Linux virtual memory, so that everything above the driver
 * runs and is tested without a GPU, on real addresses that hold real bytes.
 *
 * <ul>
 *   <li>reserve: an anonymous {@code PROT_NONE}, {@code MAP_NORESERVE} mapping, trimmed to the alignment;</li>
 *   <li>create: a {@code memfd} of the handle's size; the handle is a small increasing id, never reused;</li>
 *   <li>map: the whole memfd mapped {@code MAP_SHARED|MAP_FIXED} with no access (as cuMemMap);</li>
 *   <li>setAccess: {@code mprotect(PROT_READ|PROT_WRITE)} while any device has access, {@code PROT_NONE}
 *       once none has; which devices have it is bookkeeping (see below);</li>
 *   <li>exportHandle: a {@code dup} of the memfd; importHandle: a {@code dup} of the descriptor given,
 *       whose file size must equal the size given. A memfd passed to another process (pidfd_getfd)
 *       maps the same pages there.</li>
 *   <li>unmap: the range replaced by anonymous {@code PROT_NONE} again, i.e. back to reserved space;</li>
 *   <li>release: the memfd is closed once no mapping of it remains.</li>
 * </ul>
 *
 * <p>Errors carry CUDA's codes. The CUDA documentation lists only {@code CUDA_ERROR_INVALID_VALUE}
 * for bad arguments to the memory calls, including unknown or released handles, so this emulation
 * uses INVALID_VALUE for all of them; creating past {@link Builder#capacity} is
 * {@code CUDA_ERROR_OUT_OF_MEMORY}; unknown events are {@code CUDA_ERROR_INVALID_HANDLE} (as
 * cuEventQuery); any call after {@link #close()} is {@code CUDA_ERROR_DEINITIALIZED}.
 *
 * <p>Rules taken from the CUDA documentation: map takes the whole handle (offset 0, size equal to
 * the handle's); map must lie inside one reservation and not overlap a mapping; setAccess and unmap
 * take a range made of whole, contiguous mappings (one unmap may cover several); addressFree takes
 * exactly one reservation with nothing mapped in it.
 *
 * <p>Several devices: every host driver of a process lives in one emulated machine of
 * {@link Builder#deviceCount} devices sharing one address space, as CUDA's unified addressing. A
 * mapping remembers which devices were granted access ({@link #setAccess(long, long, long, long)});
 * {@link #isAccessibleTo} and the {@link #deviceBytes()} of the driver of device {@code d} accept a
 * range that device {@code d} was granted, whichever driver of the process mapped it. Granting a
 * device outside the machine is {@code CUDA_ERROR_INVALID_DEVICE}.
 *
 * <p>Thread-safe: one lock guards the bookkeeping and the OS calls that change it. Bookkeeping is
 * changed only after the OS call succeeded, so it always equals the OS state.
 *
 * <p>This class is the facade: it checks the driver is open, takes the lock and hands each call to
 * the part that does the job: {@link HostReservations} (address ranges), {@link HostHandles}
 * (physical memory, capacity, export and import), {@link HostMappings} (mappings and access
 * grants), {@link HostDevices} (the machine's devices), and {@link HostEvents}.
 */
public final class HostDriver implements VmmDriver, DeviceBytesProvider, DeviceCopies {
    public static final long DEFAULT_GRANULARITY = 2L << 20;
    public static final long DEFAULT_CAPACITY = 80L << 30;

    public static final int DEFAULT_DEVICE_COUNT = 8;

    private final int device;
    private final int deviceCount;
    private final long granularity;
    private final HostEvents events;
    private final HostPinnedTransfers transfers = new HostPinnedTransfers(this);
    private final Object lock = new Object();

    private final HostReservations reservations;
    private final HostMappings mappings;
    private final HostHandles handles;
    private volatile boolean closed;
    private final java.util.concurrent.atomic.AtomicLong copies = new java.util.concurrent.atomic.AtomicLong();

    private HostDriver(Builder builder) {
        this.device = builder.device;
        this.deviceCount = builder.deviceCount;
        this.granularity = builder.granularity;
        this.reservations = new HostReservations(granularity);
        this.mappings = new HostMappings(deviceCount);
        this.handles = new HostHandles(device, granularity, builder.capacity);
        this.events = new HostEvents(this);
        HostDevices.register(this);
    }

    public static Builder builder() {
        return new Builder();
    }

    /** A host driver with the default granularity (2 MiB) and capacity (80 GiB), on device 0. */
    public static HostDriver open() {
        return builder().build();
    }

    @Override
    public String name() {
        return "host";
    }

    @Override
    public int device() {
        return device;
    }

    @Override
    public long granularity() {
        return granularity;
    }

    /** Devices of the emulated machine: grants may name ordinals below it. */
    public int deviceCount() {
        return deviceCount;
    }

    /** Bytes of physical memory this emulated device holds in all. */
    public long capacity() {
        return handles.capacity();
    }

    @Override
    public long reserve(long size, long alignment) {
        synchronized (lock) {
            requireOpen(CallText.reserve(size, alignment));
            return reservations.reserve(size, alignment);
        }
    }

    @Override
    public void addressFree(long va, long size) {
        synchronized (lock) {
            requireOpen(CallText.addressFree(va, size));
            reservations.free(va, size, mappings);
        }
    }

    @Override
    public long create(long size, boolean exportable) {
        synchronized (lock) {
            requireOpen(CallText.create(size, device, exportable));
            return handles.create(size, exportable);
        }
    }

    @Override
    public void release(long handle) {
        synchronized (lock) {
            requireOpen(CallText.release(handle));
            handles.release(handle);
        }
    }

    @Override
    public void map(long va, long size, long handle) {
        String call = CallText.map(va, size, handle);
        synchronized (lock) {
            requireOpen(call);
            reservations.requireRangeInOne(va, size, call);
            mappings.map(va, size, handle, handles.live(handle, call));
        }
    }

    @Override
    public void setAccess(long va, long size) {
        changeAccess(va, size, DeviceSet.of(device), DeviceSet.NONE, CallText.setAccess(va, size, device));
    }

    @Override
    public void setAccess(long va, long size, long grant, long revoke) {
        changeAccess(va, size, grant, revoke, CallText.setAccess(va, size, grant, revoke));
    }

    private void changeAccess(long va, long size, long grant, long revoke, String call) {
        synchronized (lock) {
            requireOpen(call);
            mappings.changeAccess(va, size, grant, revoke, call);
        }
    }

    @Override
    public boolean canExport() {
        return true;
    }

    @Override
    public int exportHandle(long handle) {
        synchronized (lock) {
            requireOpen(CallText.exportHandle(handle));
            return handles.exportHandle(handle);
        }
    }

    @Override
    public long importHandle(int fd, long size) {
        synchronized (lock) {
            requireOpen(CallText.importHandle(fd, size));
            return handles.importHandle(fd, size);
        }
    }

    @Override
    public void unmap(long va, long size) {
        synchronized (lock) {
            requireOpen(CallText.unmap(va, size));
            mappings.unmap(va, size, handles);
        }
    }

    @Override
    public MemoryInfo memoryInfo() {
        synchronized (lock) {
            requireOpen(CallText.memoryInfo());
            return new MemoryInfo(handles.capacity() - handles.aliveBytes(), handles.capacity());
        }
    }

    /** The events of this driver, with the controls that hold and complete them ({@link HostEvents}). */
    @Override
    public HostEvents events() {
        return events;
    }

    /** Same as {@link #events()}, named for tests that drive completion by hand. */
    public HostEvents hostEvents() {
        return events;
    }

    /**
     * A memory copy, done at once (the emulation runs no work behind the caller's back, so stream
     * order holds). Refused with INVALID_VALUE unless both ranges are mapped with access.
     */
    @Override
    public void copy(long dst, long src, long bytes, long stream) {
        String call = "copy(dst=" + CallText.hex(dst) + ", src=" + CallText.hex(src) + ", bytes=" + CallText.hex(bytes) + ")";
        requireOpen(call);
        if (bytes < 0 || (bytes > 0 && (!isAccessible(dst, bytes) || !isAccessible(src, bytes)))) {
            throw HostErrors.invalid("both ranges must be mapped with access", call);
        }
        if (bytes == 0) return;
        java.lang.foreign.MemorySegment.copy(java.lang.foreign.MemorySegment.ofAddress(src).reinterpret(bytes), 0,
                java.lang.foreign.MemorySegment.ofAddress(dst).reinterpret(bytes), 0, bytes);
        copies.incrementAndGet();
    }

    /** Pinned host memory as plain native memory; copies made at once. */
    @Override
    public dev.vmmkit.driver.HostTransfers transfers() {
        return transfers;
    }

    /** Copies made through {@link #copy} so far (tests check that a remap made none). */
    public long copies() {
        return copies.get();
    }

    /**
     * Bytes read and written straight through the address, refused where this driver's device has
     * no access (its own mappings, and those of other host drivers that granted it).
     */
    @Override
    public DeviceBytes deviceBytes() {
        return new HostDeviceBytes(accessCheck());
    }

    /**
     * Whether this driver's device may touch a range: its own mappings, and those of other host
     * drivers that granted it. What byte access and host kernels check before each touch.
     */
    public HostDeviceBytes.AccessCheck accessCheck() {
        return (va, size) -> HostDevices.isAccessibleTo(device, va, size);
    }

    /**
     * True when {@code [va, va + size)} is covered by this driver's mappings that gave its own device
     * access, i.e. when touching it cannot fault. Lets tests read memory without risking a crash.
     */
    public boolean isAccessible(long va, long size) {
        return isAccessibleTo(device, va, size);
    }

    /** True when {@code [va, va + size)} is covered by this driver's mappings granted to {@code toDevice}. */
    public boolean isAccessibleTo(int toDevice, long va, long size) {
        synchronized (lock) {
            return !closed && mappings.isAccessibleTo(toDevice, va, size);
        }
    }

    /** What the driver holds now; all zero once everything was given back. */
    public Usage usage() {
        synchronized (lock) {
            return new Usage(reservations.count(), mappings.count(), handles.count(), handles.aliveBytes());
        }
    }

    /** Counts of what a host driver holds, for leak checks. */
    public record Usage(int reservations, int mappings, int handles, long aliveBytes) {
        public boolean isEmpty() {
            return reservations == 0 && mappings == 0 && handles == 0 && aliveBytes == 0;
        }
    }

    /** Gives back every reservation (and so every mapping) and every memfd. Idempotent. */
    @Override
    public void close() {
        synchronized (lock) {
            if (closed) {
                return;
            }
            closed = true;
            HostDevices.unregister(this);
            reservations.releaseAll();
            mappings.clear();
            handles.releaseAll();
        }
        transfers.closeAll();
        events.clear();
    }

    /** Throws DEINITIALIZED after close; every call starts with it. */
    void requireOpen(String call) {
        if (closed) {
            throw DriverException.of(CudaResult.DEINITIALIZED, call);
        }
    }

    /** Settings of a host driver; every one has a default. */
    public static final class Builder {
        private long granularity = DEFAULT_GRANULARITY;
        private long capacity = DEFAULT_CAPACITY;
        private int device;
        private int deviceCount = DEFAULT_DEVICE_COUNT;
        private boolean deviceCountSet;

        private Builder() {
        }

        /** Allocation granularity: a power of two, at least the OS page size. Default 2 MiB. */
        public Builder granularity(long granularity) {
            if (Long.bitCount(granularity) != 1 || granularity < LibC.pageSize()) {
                throw new IllegalArgumentException("granularity must be a power of two of at least the page size ("
                        + LibC.pageSize() + "), got " + granularity);
            }
            this.granularity = granularity;
            return this;
        }

        /** Bytes of physical memory the device holds; creating past it is OUT_OF_MEMORY. Default 80 GiB. */
        public Builder capacity(long capacity) {
            if (capacity < 0) {
                throw new IllegalArgumentException("capacity must not be negative, got " + capacity);
            }
            this.capacity = capacity;
            return this;
        }

        /** The device ordinal reported by {@link HostDriver#device()}. Default 0. */
        public Builder device(int device) {
            if (device < 0 || device >= DeviceSet.MAX_DEVICES) {
                throw new IllegalArgumentException("device must be in 0.." + (DeviceSet.MAX_DEVICES - 1) + ", got " + device);
            }
            this.device = device;
            return this;
        }

        /** Devices of the emulated machine (1..64): the ordinals access may be granted to. Default 8, or device + 1 if more. */
        public Builder deviceCount(int deviceCount) {
            if (deviceCount < 1 || deviceCount > DeviceSet.MAX_DEVICES) {
                throw new IllegalArgumentException("device count must be in 1.." + DeviceSet.MAX_DEVICES + ", got " + deviceCount);
            }
            this.deviceCount = deviceCount;
            this.deviceCountSet = true;
            return this;
        }

        public HostDriver build() {
            if (device >= deviceCount && deviceCountSet) {
                throw new IllegalArgumentException("device " + device + " is not below the device count " + deviceCount);
            }
            deviceCount = Math.max(deviceCount, device + 1);
            return new HostDriver(this);
        }
    }
}
