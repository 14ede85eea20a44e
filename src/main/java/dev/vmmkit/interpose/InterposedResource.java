package dev.vmmkit.interpose;

import dev.vmmkit.core.AllocatorStats;
import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.core.PeerAccess;
import dev.vmmkit.core.SharedPages;

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

    /** Peer access to this resource's memory; null when it has none (then peer calls only reach the runtime). */
    default PeerAccess peerAccess() {
        return null;
    }

    /** Export and import of memory between processes; null when it has none (IPC calls go to the runtime). */
    default SharedPages sharedPages() {
        return null;
    }

    @Override
    void close();
}
