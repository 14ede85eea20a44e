package dev.vmmkit.core;

/**
 * Whole free handles far larger than the handle cap ({@value #CAPS} caps or more) in one
 * {@link RegionHeap}: the one handle a large request got while the region was loading, or beside a
 * block that waited for the device ({@link HandleSupply}), whose memory was freed since. Carved by a
 * smaller request, such a handle would be partly live, and none of its free pages could move (the
 * driver maps, grants and unmaps a handle whole): a program's buffers freed while it loads
 * (torch.compile's benchmark buffers, the first forward pass's large tensors) would strand pages for
 * the rest of its run. So a cache hit that would carve part of one misses instead, and the slow
 * path gives such handles back before it places the request, which then gets capped handles. A
 * request that covers the handle whole (the same size again: a loop over one large buffer) still
 * hits. Measured in docs/generation-traces.md, "Five more kinds, recorded after every rule".
 */
final class OversizedFreeHandles {
    /** How many handle caps a whole free handle must pass to be given back rather than carved. */
    static final int CAPS = 8;

    private final RegionHeap region;
    /** A hit was refused since the slow path last looked. Guarded by the region's lock. */
    private boolean refused;

    OversizedFreeHandles(RegionHeap region) {
        this.region = region;
    }

    /**
     * True when carving the first {@code bytes} of FREE block {@code id} would leave part of an
     * oversized whole handle free; the caller then misses, and its slow path gives the handle back.
     * No driver call. Lock held.
     */
    boolean wouldStrand(int id, long bytes, long requested) {
        BlockTable blocks = region.blocks;
        if (blocks.size[id] - bytes < region.pageBytes || region.handles.servesTag()
                || region.handles.largestCreatedBytes() <= CAPS * region.pageBytes) {
            return false;
        }
        long from = blocks.address[id];
        long carvedEnd = from + bytes;
        // Handles the carve covers whole stay whole; only the one holding its last byte may be cut.
        long handleStart = region.pages.handleStart(carvedEnd - 1);
        long handleEnd = region.pages.handleEnd(carvedEnd - 1);
        if (handleStart < from || handleEnd > blocks.end(id) || handleEnd <= carvedEnd) return false;
        if (handleEnd - handleStart <= CAPS * region.handles.handleCap(requested) || region.loading()
                || region.budget.wouldExceed(bytes, requested)) {
            return false;
        }
        refused = true;
        return true;
    }

    /** After a refused hit, gives back every oversized whole free handle. Without the lock. */
    void giveBackAfterRefusal(long requested) {
        long oversized;
        region.lock.lock();
        try {
            if (!refused) return;
            refused = false;
            oversized = CAPS * region.handles.handleCap(requested);
        } finally {
            region.lock.unlock();
        }
        region.reclaimer.releaseHandlesOver(oversized);
    }
}
