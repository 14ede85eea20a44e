package dev.vmmkit.interpose;

import dev.vmmkit.core.AllocatorStats;
import dev.vmmkit.core.PeerAccess;
import dev.vmmkit.core.SharedPages;
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
    public AllocatorStats stats() {
        return manager.stats();
    }

    @Override
    public PeerAccess peerAccess() {
        return manager.peerAccess();
    }

    @Override
    public SharedPages sharedPages() {
        return manager.sharedPages();
    }

    @Override
    public void close() {
        manager.close();
    }
}
