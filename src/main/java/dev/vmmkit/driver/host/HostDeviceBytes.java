package dev.vmmkit.driver.host;

import dev.vmmkit.driver.DeviceBytes;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * {@link DeviceBytes} for memory the process can touch directly (the host driver's mappings):
 * a segment over the address, read and written in place. With an {@link AccessCheck}, every access
 * is first checked, so a wrong address is an exception rather than a crash of the JVM.
 */
@SuppressWarnings("restricted") // reading raw addresses is this class's whole job
public final class HostDeviceBytes implements DeviceBytes {
    private static final ValueLayout.OfLong WORD = ValueLayout.JAVA_LONG_UNALIGNED;

    /** Whether a range can be touched without faulting. */
    @FunctionalInterface
    public interface AccessCheck {
        boolean isAccessible(long address, long size);
    }

    private final AccessCheck accessCheck;

    /** @param accessCheck consulted before each access; null to trust every address */
    public HostDeviceBytes(AccessCheck accessCheck) {
        this.accessCheck = accessCheck;
    }

    /**
     * Plain host memory access through the address itself, with no safety net: touching an address
     * that is not mapped with access crashes the process, exactly as a bad kernel would fault the
     * device. Prefer {@link DeviceBytes#forDriver} with a host driver, which checks first.
     */
    public static HostDeviceBytes unchecked() {
        return new HostDeviceBytes(null);
    }

    @Override
    public void writeLong(long address, long value) {
        segment(address, Long.BYTES).set(WORD, 0, value);
    }

    @Override
    public long readLong(long address) {
        return segment(address, Long.BYTES).get(WORD, 0);
    }

    @Override
    public void fill(long address, long size, long seed) {
        MemorySegment range = segment(address, size);
        for (long offset = 0; offset < size; offset += Long.BYTES) {
            range.set(WORD, offset, DeviceBytes.patternWord(seed, offset));
        }
    }

    @Override
    public long firstMismatch(long address, long size, long seed) {
        MemorySegment range = segment(address, size);
        for (long offset = 0; offset < size; offset += Long.BYTES) {
            if (range.get(WORD, offset) != DeviceBytes.patternWord(seed, offset)) {
                return offset;
            }
        }
        return -1;
    }

    private MemorySegment segment(long address, long size) {
        if (size <= 0 || (size & (Long.BYTES - 1)) != 0) {
            throw new IllegalArgumentException("size " + size + " is not a positive multiple of 8");
        }
        if (accessCheck != null && !accessCheck.isAccessible(address, size)) {
            throw new IllegalStateException(String.format(
                    "0x%x..0x%x is not mapped with access; touching it would crash the process",
                    address, address + size));
        }
        return MemorySegment.ofAddress(address).reinterpret(size);
    }
}
