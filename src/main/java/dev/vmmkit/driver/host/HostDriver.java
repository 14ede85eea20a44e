package dev.vmmkit.driver.host;

import dev.vmmkit.driver.CallText;
import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DeviceCompute;
import dev.vmmkit.driver.DeviceSet;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.VmmDriver;
import dev.vmmkit.driver.DeviceBytes;
import dev.vmmkit.driver.DeviceBytesProvider;
import org.agrona.collections.Long2ObjectHashMap;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

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
 */
public final class HostDriver implements VmmDriver, DeviceBytesProvider {
    public static final long DEFAULT_GRANULARITY = 2L << 20;
    public static final long DEFAULT_CAPACITY = 80L << 30;

    public static final int DEFAULT_DEVICE_COUNT = 8;

    private final int device;
    private final int deviceCount;
    private final long granularity;
    private final long capacity;
    private final HostEvents events;
    private final HostCompute compute = new HostCompute(this);
    private final Object lock = new Object();

    private final TreeMap<Long, Reservation> reservations = new TreeMap<>();
    private final TreeMap<Long, Mapping> mappings = new TreeMap<>();
    private final Long2ObjectHashMap<PhysicalMemory> handles = new Long2ObjectHashMap<>();
    private long nextHandle = 1;
    /** Bytes of physical handles alive: not yet released, or released but still mapped. */
    private long aliveBytes;
    private volatile boolean closed;

    private HostDriver(Builder builder) {
        this.device = builder.device;
        this.deviceCount = builder.deviceCount;
        this.granularity = builder.granularity;
        this.capacity = builder.capacity;
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
        return capacity;
    }

    @Override
    public long reserve(long size, long alignment) {
        synchronized (lock) {
            requireOpen(CallText.reserve(size, alignment));
            if (!isPositiveMultiple(size)) {
                throw invalid("size is not a positive multiple of the granularity " + CallText.hex(granularity),
                        CallText.reserve(size, alignment));
            }
            if (alignment < 0 || Long.bitCount(alignment) > 1) {
                throw invalid("alignment is not 0 or a power of two", CallText.reserve(size, alignment));
            }
            long effectiveAlignment = Math.max(alignment, granularity);
            // Over-reserve by the alignment, then trim both ends: mmap itself aligns only to pages.
            long length = size + effectiveAlignment;
            if (length < 0) {
                throw invalid("size plus alignment overflows", CallText.reserve(size, alignment));
            }
            long raw = LibC.mmap(0, length, LibC.PROT_NONE,
                    LibC.MAP_PRIVATE | LibC.MAP_ANONYMOUS | LibC.MAP_NORESERVE, -1, 0);
            if (raw == LibC.MAP_FAILED) {
                throw osFailure("mmap of reserved space", CallText.reserve(size, alignment));
            }
            long va = alignUp(raw, effectiveAlignment);
            long headBytes = va - raw;
            long tailBytes = length - headBytes - size;
            boolean trimmed = (headBytes == 0 || LibC.munmap(raw, headBytes) == 0)
                    && (tailBytes == 0 || LibC.munmap(va + size, tailBytes) == 0);
            if (!trimmed) {
                DriverException failure = osFailure("munmap of alignment slack", CallText.reserve(size, alignment));
                LibC.munmap(raw, length);
                throw failure;
            }
            reservations.put(va, new Reservation(va, size));
            return va;
        }
    }

    @Override
    public void addressFree(long va, long size) {
        synchronized (lock) {
            requireOpen(CallText.addressFree(va, size));
            Reservation reservation = reservations.get(va);
            if (reservation == null || reservation.size != size) {
                throw invalid("not exactly one reservation", CallText.addressFree(va, size));
            }
            Map.Entry<Long, Mapping> inside = mappings.ceilingEntry(va);
            if (inside != null && inside.getKey() < va + size) {
                throw invalid("the reservation still has mappings (first at "
                        + CallText.hex(inside.getKey()) + ")", CallText.addressFree(va, size));
            }
            if (LibC.munmap(va, size) != 0) {
                throw osFailure("munmap", CallText.addressFree(va, size));
            }
            reservations.remove(va);
        }
    }

    @Override
    public long create(long size) {
        synchronized (lock) {
            requireOpen(CallText.create(size, device));
            if (!isPositiveMultiple(size)) {
                throw invalid("size is not a positive multiple of the granularity " + CallText.hex(granularity),
                        CallText.create(size, device));
            }
            if (size > capacity - aliveBytes) {
                throw new DriverException(CudaResult.OUT_OF_MEMORY,
                        CudaResult.describe(CudaResult.OUT_OF_MEMORY) + ": capacity " + CallText.hex(capacity)
                                + ", in use " + CallText.hex(aliveBytes), CallText.create(size, device));
            }
            int fd = LibC.memfdCreate();
            if (fd < 0) {
                throw osFailure("memfd_create", CallText.create(size, device));
            }
            if (LibC.ftruncate(fd, size) != 0) {
                DriverException failure = osFailure("ftruncate", CallText.create(size, device));
                LibC.close(fd);
                throw failure;
            }
            long handle = nextHandle++;
            handles.put(handle, new PhysicalMemory(fd, size, false));
            aliveBytes += size;
            return handle;
        }
    }

    @Override
    public void release(long handle) {
        synchronized (lock) {
            requireOpen(CallText.release(handle));
            PhysicalMemory memory = liveHandle(handle, CallText.release(handle));
            memory.released = true;
            if (memory.mappingCount == 0) {
                destroy(handle, memory);
            }
        }
    }

    @Override
    public void map(long va, long size, long handle) {
        synchronized (lock) {
            requireOpen(CallText.map(va, size, handle));
            requireRangeInOneReservation(va, size, CallText.map(va, size, handle));
            PhysicalMemory memory = liveHandle(handle, CallText.map(va, size, handle));
            if (memory.size != size) {
                throw invalid("size differs from the handle's size " + CallText.hex(memory.size)
                        + " (a map takes the whole handle)", CallText.map(va, size, handle));
            }
            Mapping overlapping = firstMappingOverlapping(va, size);
            if (overlapping != null) {
                throw invalid("the range overlaps the mapping at " + CallText.hex(overlapping.va),
                        CallText.map(va, size, handle));
            }
            long mapped = LibC.mmap(va, size, LibC.PROT_NONE, LibC.MAP_SHARED | LibC.MAP_FIXED, memory.fd, 0);
            if (mapped == LibC.MAP_FAILED) {
                DriverException failure = osFailure("mmap of the handle", CallText.map(va, size, handle));
                // A failed MAP_FIXED may already have replaced the old pages: put reserved space back.
                backToReserved(va, size, failure);
                throw failure;
            }
            mappings.put(va, new Mapping(va, size, handle));
            memory.mappingCount++;
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
            if ((grant & revoke) != 0) {
                throw invalid("devices " + DeviceSet.toString(grant & revoke) + " are both granted and revoked", call);
            }
            long known = deviceCount == DeviceSet.MAX_DEVICES ? -1L : (1L << deviceCount) - 1;
            if (((grant | revoke) & ~known) != 0) {
                throw new DriverException(CudaResult.INVALID_DEVICE, CudaResult.describe(CudaResult.INVALID_DEVICE)
                        + ": the machine has devices 0.." + (deviceCount - 1), call);
            }
            List<Mapping> covered = wholeMappings(va, size, call);
            for (Mapping mapping : covered) {
                long access = (mapping.access | grant) & ~revoke;
                int protection = access == 0 ? LibC.PROT_NONE : LibC.PROT_READ | LibC.PROT_WRITE;
                // Mappings changed before a failing mprotect keep their new access: as with a
                // partial cuMemSetAccess, the caller undoes the whole range.
                if (LibC.mprotect(mapping.va, mapping.size, protection) != 0) {
                    throw osFailure("mprotect", call);
                }
                mapping.access = access;
            }
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
            PhysicalMemory memory = liveHandle(handle, CallText.exportHandle(handle));
            int fd = LibC.dup(memory.fd);
            if (fd < 0) {
                throw osFailure("dup of the memfd", CallText.exportHandle(handle));
            }
            return fd;
        }
    }

    @Override
    public long importHandle(int fd, long size) {
        String call = CallText.importHandle(fd, size);
        synchronized (lock) {
            requireOpen(call);
            if (!isPositiveMultiple(size)) {
                throw invalid("size is not a positive multiple of the granularity " + CallText.hex(granularity), call);
            }
            long fileSize = fd < 0 ? -1 : LibC.fileSize(fd);
            if (fileSize != size) {
                throw invalid(fileSize < 0 ? "not an open descriptor of exported memory"
                        : "the memory behind the descriptor has " + CallText.hex(fileSize) + " bytes", call);
            }
            int own = LibC.dup(fd);
            if (own < 0) {
                throw osFailure("dup of the descriptor", call);
            }
            long handle = nextHandle++;
            // Imported memory belongs to the exporter's device: it does not count against this one.
            handles.put(handle, new PhysicalMemory(own, size, true));
            return handle;
        }
    }

    @Override
    public void unmap(long va, long size) {
        synchronized (lock) {
            requireOpen(CallText.unmap(va, size));
            List<Mapping> covered = wholeMappings(va, size, CallText.unmap(va, size));
            if (!replaceWithReserved(va, size)) {
                throw osFailure("mmap of reserved space over the mappings", CallText.unmap(va, size));
            }
            for (Mapping mapping : covered) {
                mappings.remove(mapping.va);
                PhysicalMemory memory = handles.get(mapping.handle);
                memory.mappingCount--;
                if (memory.released && memory.mappingCount == 0) {
                    destroy(mapping.handle, memory);
                }
            }
        }
    }

    @Override
    public MemoryInfo memoryInfo() {
        synchronized (lock) {
            requireOpen(CallText.memoryInfo());
            return new MemoryInfo(capacity - aliveBytes, capacity);
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

    /** Kernels as Java loops over the mapped bytes, checked against the mappings first. */
    @Override
    public DeviceCompute compute() {
        return compute;
    }

    /**
     * Bytes read and written straight through the address, refused where this driver's device has
     * no access (its own mappings, and those of other host drivers that granted it).
     */
    @Override
    public DeviceBytes deviceBytes() {
        return new HostDeviceBytes((va, size) -> HostDevices.isAccessibleTo(device, va, size));
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
            if (closed || size <= 0 || va <= 0 || va + size < va) {
                return false;
            }
            Map.Entry<Long, Mapping> entry = mappings.floorEntry(va);
            long end = va + size;
            long covered = va;
            while (entry != null && covered < end) {
                Mapping mapping = entry.getValue();
                if (!DeviceSet.contains(mapping.access, toDevice) || mapping.va > covered || mapping.end() <= covered) {
                    return false;
                }
                covered = mapping.end();
                entry = mappings.higherEntry(mapping.va);
            }
            return covered >= end;
        }
    }

    /** What the driver holds now; all zero once everything was given back. */
    public Usage usage() {
        synchronized (lock) {
            return new Usage(reservations.size(), mappings.size(), handles.size(), aliveBytes);
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
            for (Reservation reservation : reservations.values()) {
                LibC.munmap(reservation.va, reservation.size);
            }
            handles.forEach((handle, memory) -> LibC.close(memory.fd));
            reservations.clear();
            mappings.clear();
            handles.clear();
            aliveBytes = 0;
        }
        events.clear();
    }

    // ---- checks shared by the calls ----

    /** Throws DEINITIALIZED after close; every call starts with it. */
    void requireOpen(String call) {
        if (closed) {
            throw DriverException.of(CudaResult.DEINITIALIZED, call);
        }
    }

    private boolean isPositiveMultiple(long size) {
        return size > 0 && (size & (granularity - 1)) == 0;
    }

    private void requireRangeInOneReservation(long va, long size, String call) {
        if (!isPositiveMultiple(size)) {
            throw invalid("size is not a positive multiple of the granularity " + CallText.hex(granularity), call);
        }
        if (va <= 0 || (va & (granularity - 1)) != 0) {
            throw invalid("address is not a non-null multiple of the granularity " + CallText.hex(granularity), call);
        }
        if (va + size < va) {
            throw invalid("address plus size overflows", call);
        }
        Map.Entry<Long, Reservation> entry = reservations.floorEntry(va);
        if (entry == null || entry.getValue().end() < va + size || entry.getValue().end() <= va) {
            throw invalid("the range is not inside one reservation", call);
        }
    }

    private PhysicalMemory liveHandle(long handle, String call) {
        PhysicalMemory memory = handles.get(handle);
        if (memory == null || memory.released) {
            throw invalid(memory == null ? "unknown handle" : "the handle was released", call);
        }
        return memory;
    }

    private Mapping firstMappingOverlapping(long va, long size) {
        Map.Entry<Long, Mapping> before = mappings.floorEntry(va);
        if (before != null && before.getValue().end() > va) {
            return before.getValue();
        }
        Map.Entry<Long, Mapping> after = mappings.higherEntry(va);
        if (after != null && after.getKey() < va + size) {
            return after.getValue();
        }
        return null;
    }

    /** The mappings that make up exactly {@code [va, va + size)}, contiguous and whole, or INVALID_VALUE. */
    private List<Mapping> wholeMappings(long va, long size, String call) {
        if (size <= 0 || va <= 0 || va + size < va) {
            throw invalid("the range is empty, null or overflows", call);
        }
        Mapping first = mappings.get(va);
        if (first == null) {
            throw invalid("no mapping starts at the address", call);
        }
        List<Mapping> covered = new ArrayList<>();
        long end = va + size;
        Mapping next = first;
        while (true) {
            covered.add(next);
            if (next.end() == end) {
                return covered;
            }
            if (next.end() > end) {
                throw invalid("the range ends inside the mapping at " + CallText.hex(next.va)
                        + " (only whole mappings can be given access or unmapped)", call);
            }
            next = mappings.get(next.end());
            if (next == null) {
                throw invalid("the range is not fully mapped", call);
            }
        }
    }

    /** Turns a range back into plain reserved space (no access, no backing). */
    private static boolean replaceWithReserved(long va, long size) {
        return LibC.mmap(va, size, LibC.PROT_NONE,
                LibC.MAP_PRIVATE | LibC.MAP_ANONYMOUS | LibC.MAP_NORESERVE | LibC.MAP_FIXED, -1, 0) != LibC.MAP_FAILED;
    }

    private static void backToReserved(long va, long size, DriverException failure) {
        if (!replaceWithReserved(va, size)) {
            failure.addSuppressed(new IllegalStateException(
                    "could not restore reserved space at " + CallText.hex(va) + ": " + LibC.describeErrno(LibC.errno())));
        }
    }

    private void destroy(long handle, PhysicalMemory memory) {
        LibC.close(memory.fd);
        handles.remove(handle);
        if (!memory.imported) {
            aliveBytes -= memory.size;
        }
    }

    private static long alignUp(long value, long alignment) {
        return (value + alignment - 1) & -alignment;
    }

    private static DriverException invalid(String why, String call) {
        return new DriverException(CudaResult.INVALID_VALUE,
                CudaResult.describe(CudaResult.INVALID_VALUE) + ": " + why, call);
    }

    /** An OS call failed: out of memory for ENOMEM and descriptor or space exhaustion, else UNKNOWN. */
    private static DriverException osFailure(String what, String call) {
        int errno = LibC.errno();
        int result = switch (errno) {
            case LibC.ENOMEM, LibC.EMFILE, LibC.ENFILE, LibC.ENOSPC -> CudaResult.OUT_OF_MEMORY;
            case LibC.EINVAL -> CudaResult.INVALID_VALUE;
            default -> CudaResult.UNKNOWN;
        };
        return new DriverException(result,
                CudaResult.describe(result) + ": " + what + " failed: " + LibC.describeErrno(errno), call);
    }

    // ---- bookkeeping records ----

    private record Reservation(long va, long size) {
        long end() {
            return va + size;
        }
    }

    private static final class Mapping {
        final long va;
        final long size;
        final long handle;
        /** The devices granted access ({@link DeviceSet}). */
        long access;

        Mapping(long va, long size, long handle) {
            this.va = va;
            this.size = size;
            this.handle = handle;
        }

        long end() {
            return va + size;
        }
    }

    private static final class PhysicalMemory {
        final int fd;
        final long size;
        /** Made by importHandle: another device's (or process's) memory, not counted in aliveBytes. */
        final boolean imported;
        int mappingCount;
        boolean released;

        PhysicalMemory(int fd, long size, boolean imported) {
            this.fd = fd;
            this.size = size;
            this.imported = imported;
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
