package dev.vmmkit.core;

/**
 * A {@link DeviceMemoryResource} that can also say what it handed out: the queries the interposer
 * and the tools need beside allocate and free. {@link VmmManager} implements it; adaptors such as
 * {@code dev.vmmkit.trace.RecordingResource} forward it.
 */
public interface ManagedMemoryResource extends DeviceMemoryResource, AutoCloseable {

    /**
     * True when {@code address} belongs to this resource, so a free of it must come here (for
     * {@link VmmManager}: it lies in address space the manager reserved, live or not).
     */
    boolean owns(long address);

    /** The requested size of the live allocation that starts at {@code address}, or -1. */
    long sizeOf(long address);

    /**
     * The first address of the live allocation that holds {@code address} (its first byte or any
     * byte up to the end of its block), or -1 when none does. Walks the region's blocks: for
     * questions a program asks about a pointer (cuMemGetAddressRange), not for the hot path.
     */
    default long liveAllocationHolding(long address) {
        return sizeOf(address) >= 0 ? address : -1;
    }

    /** A consistent snapshot of the resource's figures. */
    AllocatorStats stats();

    /**
     * The physical bytes held now ({@link AllocatorStats#reservedBytes}), for a sampler that reads
     * it beside the driver's figure: {@link VmmManager} reads one counter, no snapshot of its regions.
     */
    default long reservedBytes() {
        return stats().reservedBytes();
    }

    /**
     * Resizes a live allocation with realloc's semantics (see {@link VmmManager#reallocate});
     * returns its address afterwards.
     */
    default long reallocate(long address, long newSize, long stream) {
        throw new UnsupportedOperationException("this resource cannot resize allocations");
    }

    /**
     * Does a device-to-device copy of {@code count} bytes from {@code src} to {@code dst} by
     * remapping pages when it may (see {@link VmmManager#remapCopy}); false when the caller must copy.
     */
    default boolean remapCopy(long dst, long src, long count, long stream) {
        return false;
    }

    /** Peer access to this resource's memory; null when it has none (then peer calls only reach the runtime). */
    default PeerAccess peerAccess() {
        return null;
    }

    /** Export and import of memory between processes; null when it has none (IPC calls go to the runtime). */
    default SharedPages sharedPages() {
        return null;
    }

    /**
     * Gives the memory it caches (free blocks' pages, pooled handles) back to the device, after the
     * frees still waiting for the device's work; returns the bytes given back (0: it caches none).
     */
    default long releaseCachedMemory() {
        return 0;
    }

    /** Memory tags, paused and resumed by name; null when the resource has none. */
    default MemoryTagControl tagControl() {
        return null;
    }

    /** The CUDA stream captures under way, which the resource must not disturb; null when it needs not know. */
    default StreamCaptures streamCaptures() {
        return null;
    }

    /**
     * When memory freed device-wide became reusable, for a recorder; null when the resource
     * reuses it at once (it defers nothing).
     */
    default DeviceWideFreeClock deviceWideFreeClock() {
        return null;
    }

    /** Gives everything back; live allocations become invalid. */
    @Override
    void close();
}
