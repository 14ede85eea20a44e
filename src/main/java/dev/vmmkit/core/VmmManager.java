package dev.vmmkit.core;

import dev.vmmkit.driver.VmmDriver;

/**
 * The facade of one device's allocator (seed: VmmManager). Work in progress: the public surface
 * below is fixed; the implementation lands with the allocator issue.
 */
public final class VmmManager implements DeviceMemoryResource, AutoCloseable {

    public VmmManager(VmmDriver driver, VmmConfig config) {
        throw new UnsupportedOperationException("allocator not landed yet");
    }

    @Override
    public long allocate(long size, long stream) {
        throw new UnsupportedOperationException();
    }

    @Override
    public void deallocate(long address, long stream) {
        throw new UnsupportedOperationException();
    }

    /** True when {@code address} lies inside a live allocation of this manager. */
    public boolean owns(long address) {
        throw new UnsupportedOperationException();
    }

    /** The requested size of the live allocation that starts at {@code address}, or -1. */
    public long sizeOf(long address) {
        throw new UnsupportedOperationException();
    }

    public AllocatorStats stats() {
        throw new UnsupportedOperationException();
    }

    /** Releases every cached physical handle that no live allocation needs; returns the bytes released. */
    public long drain() {
        throw new UnsupportedOperationException();
    }

    @Override
    public void close() {
    }
}
