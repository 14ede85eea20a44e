package dev.vmmkit.interpose;

import dev.vmmkit.core.AllocatorStats;
import dev.vmmkit.core.DeviceMemoryResource;

/**
 * What the interposer needs from one device's allocator: the {@link DeviceMemoryResource} calls,
 * plus ownership (a cudaFree of a pointer vmmkit did not hand out goes to the real runtime) and
 * figures for the stats file. {@link dev.vmmkit.core.VmmManager} provides all of it.
 */
public interface InterposedResource extends DeviceMemoryResource, AutoCloseable {

    /** True when {@code address} lies inside a live allocation of this resource. */
    boolean owns(long address);

    /** The requested size of the live allocation starting at {@code address}, or -1. */
    long sizeOf(long address);

    AllocatorStats stats();

    /**
     * Resizes a live allocation with realloc's semantics (see
     * {@link dev.vmmkit.core.VmmManager#reallocate}); returns its address afterwards.
     */
    default long reallocate(long address, long newSize, long stream) {
        throw new UnsupportedOperationException("this allocator cannot resize in place");
    }

    /**
     * Does a device-to-device copy of {@code count} bytes from {@code src} to {@code dst} by
     * remapping pages when it may (see {@link dev.vmmkit.core.VmmManager#remapCopy}); false when the
     * caller must copy.
     */
    default boolean remapCopy(long dst, long src, long count, long stream) {
        return false;
    }

    @Override
    void close();
}
