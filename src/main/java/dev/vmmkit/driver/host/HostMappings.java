package dev.vmmkit.driver.host;

import dev.vmmkit.driver.CallText;
import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DeviceSet;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.LibC;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import static dev.vmmkit.driver.host.HostErrors.invalid;
import static dev.vmmkit.driver.host.HostErrors.osFailure;

/**
 * The emulated device's mappings and the devices granted access to each: a handle's memfd mapped
 * {@code MAP_SHARED|MAP_FIXED} over reserved space, {@code mprotect}ed readable and writable while
 * any device has access. Unmapping puts reserved space back. Not thread-safe: the
 * {@link HostDriver} calls it under its lock.
 */
final class HostMappings {
    private final int deviceCount;
    private final TreeMap<Long, Mapping> byStart = new TreeMap<>();

    HostMappings(int deviceCount) {
        this.deviceCount = deviceCount;
    }

    /** Maps all of {@code memory} at {@code va}, with no access; the range was checked to lie in one reservation. */
    void map(long va, long size, long handle, HostHandles.PhysicalMemory memory) {
        String call = CallText.map(va, size, handle);
        if (memory.size != size) {
            throw invalid("size differs from the handle's size " + CallText.hex(memory.size)
                    + " (a map takes the whole handle)", call);
        }
        Mapping overlapping = firstOverlapping(va, size);
        if (overlapping != null) {
            throw invalid("the range overlaps the mapping at " + CallText.hex(overlapping.va), call);
        }
        long mapped = LibC.mmap(va, size, LibC.PROT_NONE, LibC.MAP_SHARED | LibC.MAP_FIXED, memory.fd, 0);
        if (mapped == LibC.MAP_FAILED) {
            DriverException failure = osFailure("mmap of the handle", call);
            // A failed MAP_FIXED may already have replaced the old pages: put reserved space back.
            backToReserved(va, size, failure);
            throw failure;
        }
        byStart.put(va, new Mapping(va, size, handle));
        memory.mappingCount++;
    }

    /** Grants and revokes devices' access over whole mappings making up {@code [va, va + size)}. */
    void changeAccess(long va, long size, long grant, long revoke, String call) {
        if ((grant & revoke) != 0) {
            throw invalid("devices " + DeviceSet.toString(grant & revoke) + " are both granted and revoked", call);
        }
        long known = deviceCount == DeviceSet.MAX_DEVICES ? -1L : (1L << deviceCount) - 1;
        if (((grant | revoke) & ~known) != 0) {
            throw new DriverException(CudaResult.INVALID_DEVICE, CudaResult.describe(CudaResult.INVALID_DEVICE)
                    + ": the machine has devices 0.." + (deviceCount - 1), call);
        }
        for (Mapping mapping : wholeMappings(va, size, call)) {
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

    /** Unmaps the whole mappings making up {@code [va, va + size)}, telling {@code handles} of each. */
    void unmap(long va, long size, HostHandles handles) {
        String call = CallText.unmap(va, size);
        List<Mapping> covered = wholeMappings(va, size, call);
        if (!replaceWithReserved(va, size)) {
            throw osFailure("mmap of reserved space over the mappings", call);
        }
        for (Mapping mapping : covered) {
            byStart.remove(mapping.va);
            handles.unmapped(mapping.handle);
        }
    }

    /** True when {@code [va, va + size)} is covered by mappings granted to {@code toDevice}. */
    boolean isAccessibleTo(int toDevice, long va, long size) {
        if (size <= 0 || va <= 0 || va + size < va) {
            return false;
        }
        Map.Entry<Long, Mapping> entry = byStart.floorEntry(va);
        long end = va + size;
        long covered = va;
        while (entry != null && covered < end) {
            Mapping mapping = entry.getValue();
            if (!DeviceSet.contains(mapping.access, toDevice) || mapping.va > covered || mapping.end() <= covered) {
                return false;
            }
            covered = mapping.end();
            entry = byStart.higherEntry(mapping.va);
        }
        return covered >= end;
    }

    /** The start of the first mapping inside {@code [va, va + size)}, or 0 when none. */
    long firstStartIn(long va, long size) {
        Long inside = byStart.ceilingKey(va);
        return inside != null && inside < va + size ? inside : 0;
    }

    int count() {
        return byStart.size();
    }

    /** Forgets every mapping; for close, after the reservations holding them were unmapped. */
    void clear() {
        byStart.clear();
    }

    private Mapping firstOverlapping(long va, long size) {
        Map.Entry<Long, Mapping> before = byStart.floorEntry(va);
        if (before != null && before.getValue().end() > va) {
            return before.getValue();
        }
        Map.Entry<Long, Mapping> after = byStart.higherEntry(va);
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
        Mapping first = byStart.get(va);
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
            next = byStart.get(next.end());
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
}
