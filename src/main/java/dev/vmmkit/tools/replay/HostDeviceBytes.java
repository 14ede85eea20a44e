package dev.vmmkit.tools.replay;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * {@link DeviceBytes} for the host emulation, whose device addresses are host addresses: bytes are
 * copied straight to and from them. Only valid where that holds; anywhere else it would corrupt
 * or crash the process.
 */
public final class HostDeviceBytes implements DeviceBytes {
    public static final HostDeviceBytes INSTANCE = new HostDeviceBytes();

    /**
     * The whole address space as one segment, made once: copying at an offset of it is the same as
     * {@code MemorySegment.ofAddress(address).reinterpret(length)} without a new segment per copy.
     */
    @SuppressWarnings("restricted") // reaching raw addresses is this class's whole job
    private static final MemorySegment ADDRESS_SPACE = MemorySegment.NULL.reinterpret(Long.MAX_VALUE);

    private HostDeviceBytes() {
    }

    @Override
    public void write(long address, byte[] from, int length) {
        MemorySegment.copy(from, 0, ADDRESS_SPACE, ValueLayout.JAVA_BYTE, address, length);
    }

    @Override
    public void read(long address, byte[] into, int length) {
        MemorySegment.copy(ADDRESS_SPACE, ValueLayout.JAVA_BYTE, address, into, 0, length);
    }
}
