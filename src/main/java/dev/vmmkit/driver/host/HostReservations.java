package dev.vmmkit.driver.host;

import dev.vmmkit.driver.CallText;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.LibC;

import java.util.Map;
import java.util.TreeMap;

import static dev.vmmkit.driver.host.HostErrors.invalid;
import static dev.vmmkit.driver.host.HostErrors.osFailure;
import static dev.vmmkit.driver.host.HostErrors.requirePositiveMultiple;

/**
 * The emulated device's reserved address ranges: anonymous {@code PROT_NONE}, {@code MAP_NORESERVE}
 * mappings trimmed to the alignment. Not thread-safe: the {@link HostDriver} calls it under its lock.
 */
final class HostReservations {
    private final long granularity;
    private final TreeMap<Long, Long> sizeByStart = new TreeMap<>();

    HostReservations(long granularity) {
        this.granularity = granularity;
    }

    long reserve(long size, long alignment) {
        String call = CallText.reserve(size, alignment);
        requirePositiveMultiple(size, granularity, call);
        if (alignment < 0 || Long.bitCount(alignment) > 1) {
            throw invalid("alignment is not 0 or a power of two", call);
        }
        long effectiveAlignment = Math.max(alignment, granularity);
        // Over-reserve by the alignment, then trim both ends: mmap itself aligns only to pages.
        long length = size + effectiveAlignment;
        if (length < 0) {
            throw invalid("size plus alignment overflows", call);
        }
        long raw = LibC.mmap(0, length, LibC.PROT_NONE,
                LibC.MAP_PRIVATE | LibC.MAP_ANONYMOUS | LibC.MAP_NORESERVE, -1, 0);
        if (raw == LibC.MAP_FAILED) {
            throw osFailure("mmap of reserved space", call);
        }
        long va = (raw + effectiveAlignment - 1) & -effectiveAlignment;
        long headBytes = va - raw;
        long tailBytes = length - headBytes - size;
        boolean trimmed = (headBytes == 0 || LibC.munmap(raw, headBytes) == 0)
                && (tailBytes == 0 || LibC.munmap(va + size, tailBytes) == 0);
        if (!trimmed) {
            DriverException failure = osFailure("munmap of alignment slack", call);
            LibC.munmap(raw, length);
            throw failure;
        }
        sizeByStart.put(va, size);
        return va;
    }

    /** Gives back exactly one reservation; {@code mappings} must hold nothing inside it. */
    void free(long va, long size, HostMappings mappings) {
        String call = CallText.addressFree(va, size);
        Long reserved = sizeByStart.get(va);
        if (reserved == null || reserved != size) {
            throw invalid("not exactly one reservation", call);
        }
        long inside = mappings.firstStartIn(va, size);
        if (inside != 0) {
            throw invalid("the reservation still has mappings (first at " + CallText.hex(inside) + ")", call);
        }
        if (LibC.munmap(va, size) != 0) {
            throw osFailure("munmap", call);
        }
        sizeByStart.remove(va);
    }

    /** INVALID_VALUE unless {@code [va, va + size)} is granularity-aligned and inside one reservation. */
    void requireRangeInOne(long va, long size, String call) {
        requirePositiveMultiple(size, granularity, call);
        if (va <= 0 || (va & (granularity - 1)) != 0) {
            throw invalid("address is not a non-null multiple of the granularity " + CallText.hex(granularity), call);
        }
        if (va + size < va) {
            throw invalid("address plus size overflows", call);
        }
        Map.Entry<Long, Long> entry = sizeByStart.floorEntry(va);
        long end = entry == null ? 0 : entry.getKey() + entry.getValue();
        if (entry == null || end < va + size || end <= va) {
            throw invalid("the range is not inside one reservation", call);
        }
    }

    int count() {
        return sizeByStart.size();
    }

    /** Unmaps every reservation (and with it every mapping inside); for close. */
    void releaseAll() {
        sizeByStart.forEach(LibC::munmap);
        sizeByStart.clear();
    }
}
