package dev.vmmkit.core;

/**
 * What one {@link RegionHeap} has handed out and taken back, as far as the slow path's choices
 * need it: whether the region is still loading, and whether a request is a malloc/free loop's turn.
 * Updated by the region's allocations and frees, read by its slow paths; every call with the
 * region's lock held.
 */
final class RequestHistory {
    /** See {@link #loading}. */
    static final int LOADING_FREED_SHARE = 64;

    // Requested bytes handed out and freed.
    private long allocatedBytes;
    private long freedBytes;
    // The size of the last block freed, and whether any allocation came since.
    private long lastFreedBlockBytes = -1;
    private boolean allocatedSinceLastFree = true;

    void allocated(long requested) {
        allocatedBytes += requested;
        allocatedSinceLastFree = true;
    }

    /** An allocation of {@code requested} bytes was freed (an alias's retirement included). */
    void freed(long requested) {
        freedBytes += requested;
    }

    /** Its block of {@code blockBytes} became free. */
    void blockFreed(long blockBytes) {
        lastFreedBlockBytes = blockBytes;
        allocatedSinceLastFree = false;
    }

    /**
     * True while the region has freed at most 1/{@value #LOADING_FREED_SHARE} of the bytes it handed
     * out, as a program does while it loads a model's weights ({@link RegionHeap#loading}).
     */
    boolean loading() {
        return freedBytes * LOADING_FREED_SHARE <= allocatedBytes;
    }

    /**
     * True when a request of {@code bytes} (aligned; {@code pageBytes} rounded up to a page) comes
     * right after a free of a block of either size, nothing allocated between: a malloc/free loop's
     * turn, the one pattern the same-size rotation is for ({@link SlowPath}).
     */
    boolean followsAFreeOf(long bytes, long pageBytes) {
        return !allocatedSinceLastFree && (lastFreedBlockBytes == bytes || lastFreedBlockBytes == pageBytes);
    }
}
