package dev.vmmkit.core;

import org.agrona.collections.Long2LongHashMap;

/**
 * The physical handles that aliases (sources of a remap, see {@link RegionRemapper}) still map,
 * for the whole manager: a handle's owner may let it go (freed, reclaimed, moved to another region)
 * while an alias maps it. Such a handle is kept here, and counted, instead of being pooled or
 * released, until the last alias mapping it is unmapped; then it is handed back.
 *
 * <p>Only slow paths use it (remaps, pooling, releasing), so one lock is enough. Nothing is
 * allocated while no alias exists.
 */
final class AliasedHandles {
    /** Handles that aliases map, with how many alias mappings of each there are. */
    private final Long2LongHashMap mappings = new Long2LongHashMap(0);
    /** Handles (and their bytes) their owner let go of while an alias still mapped them. */
    private final Long2LongHashMap held = new Long2LongHashMap(0);

    /** An alias now maps {@code handle}. */
    synchronized void mapped(long handle) {
        mappings.put(handle, mappings.get(handle) + 1);
    }

    /** True while an alias maps {@code handle}. */
    synchronized boolean isAliased(long handle) {
        return mappings.get(handle) > 0;
    }

    /**
     * An alias no longer maps {@code handle}; returns its bytes when it was held and no alias maps
     * it any more (the caller pools or releases it), else 0.
     */
    synchronized long unmapped(long handle) {
        long left = mappings.get(handle) - 1;
        if (left > 0) {
            mappings.put(handle, left);
            return 0;
        }
        mappings.remove(handle);
        return held.remove(handle);
    }

    /** True (and the handle is kept) when an alias still maps {@code handle}, which its owner lets go of. */
    synchronized boolean keep(long handle, long bytes) {
        if (mappings.isEmpty() || mappings.get(handle) == 0) return false;
        held.put(handle, bytes);
        return true;
    }
}
