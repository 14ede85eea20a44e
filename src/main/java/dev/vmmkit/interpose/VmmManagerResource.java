package dev.vmmkit.interpose;

import dev.vmmkit.core.AllocatorStats;
import dev.vmmkit.core.VmmManager;

/** A {@link VmmManager} seen as an {@link InterposedResource}: every call is forwarded. */
record VmmManagerResource(VmmManager manager) implements InterposedResource {

    @Override
    public long allocate(long size, long stream) {
        return manager.allocate(size, stream);
    }

    @Override
    public void deallocate(long address, long stream) {
        manager.deallocate(address, stream);
    }

    @Override
    public boolean owns(long address) {
        return manager.owns(address);
    }

    @Override
    public long sizeOf(long address) {
        return manager.sizeOf(address);
    }

    @Override
    public long reallocate(long address, long newSize, long stream) {
        return manager.reallocate(address, newSize, stream);
    }

    @Override
    public boolean remapCopy(long dst, long src, long count, long stream) {
        return manager.remapCopy(dst, src, count, stream);
    }

    @Override
    public AllocatorStats stats() {
        return manager.stats();
    }

    @Override
    public void close() {
        manager.close();
    }
}
