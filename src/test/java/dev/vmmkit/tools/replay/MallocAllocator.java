package dev.vmmkit.tools.replay;

import dev.vmmkit.core.AllocatorStats;
import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.core.InvalidAddressException;
import dev.vmmkit.driver.DriverCall;
import org.agrona.collections.Long2LongHashMap;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.Map;

/**
 * A plain reference allocator for tests: every request is a libc {@code malloc} of the size rounded
 * up to 512 bytes, every free a {@code free}. Its figures are honest: "reserved" is what it asked
 * malloc for, each malloc counts as a CREATE driver call and a cache miss, each free as a RELEASE.
 */
public final class MallocAllocator implements DeviceMemoryResource, ReplayTarget {
    private static final long UNIT = 512;
    private static final MethodHandle MALLOC =
            libc("malloc", FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.JAVA_LONG));
    private static final MethodHandle FREE = libc("free", FunctionDescriptor.ofVoid(ValueLayout.ADDRESS));

    private final Long2LongHashMap sizeOf = new Long2LongHashMap(1 << 16, 0.6f, -1);
    private long allocations;
    private long frees;
    private long liveBytes;
    private long peakLiveBytes;
    private long reservedBytes;
    private long peakReservedBytes;

    @Override
    public long allocate(long size, long stream) {
        if (size < 0) throw new IllegalArgumentException("negative size " + size);
        if (size == 0) return 0;
        long rounded = (size + UNIT - 1) / UNIT * UNIT;
        long address = malloc(rounded);
        sizeOf.put(address, size);
        allocations++;
        liveBytes += size;
        peakLiveBytes = Math.max(peakLiveBytes, liveBytes);
        reservedBytes += rounded;
        peakReservedBytes = Math.max(peakReservedBytes, reservedBytes);
        return address;
    }

    @Override
    public void deallocate(long address, long stream) {
        if (address == 0) return;
        long size = sizeOf.remove(address);
        if (size < 0) throw new InvalidAddressException(address, "not a live allocation");
        free(address);
        frees++;
        liveBytes -= size;
        reservedBytes -= (size + UNIT - 1) / UNIT * UNIT;
    }

    @Override
    public DeviceMemoryResource resource() {
        return this;
    }

    @Override
    public AllocatorStats stats() {
        return new AllocatorStats(allocations, frees, liveBytes, peakLiveBytes, reservedBytes, peakReservedBytes,
                0, 0, allocations, 0, Map.of(DriverCall.CREATE, allocations, DriverCall.RELEASE, frees));
    }

    /** Frees what the trace left live. */
    @Override
    public void close() {
        sizeOf.forEachLong((address, size) -> free(address));
        sizeOf.clear();
    }

    @SuppressWarnings("restricted") // binding libc is the point of this test allocator
    private static MethodHandle libc(String name, FunctionDescriptor signature) {
        Linker linker = Linker.nativeLinker();
        return linker.downcallHandle(linker.defaultLookup().find(name).orElseThrow(), signature);
    }

    private static long malloc(long size) {
        long address;
        try {
            address = ((MemorySegment) MALLOC.invokeExact(size)).address();
        } catch (Throwable e) {
            throw new RuntimeException(e);
        }
        if (address == 0) throw new OutOfMemoryError("malloc(" + size + ") failed");
        return address;
    }

    private static void free(long address) {
        try {
            FREE.invokeExact(MemorySegment.ofAddress(address));
        } catch (Throwable e) {
            throw new RuntimeException(e);
        }
    }
}
