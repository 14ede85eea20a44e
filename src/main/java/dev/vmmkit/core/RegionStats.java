package dev.vmmkit.core;

/**
 * A snapshot of one region's counters, taken under its lock.
 *
 * @param allocations     allocations served
 * @param frees           frees of live allocations
 * @param cacheHits       allocations served from free mapped memory, with no driver call
 * @param cacheMisses     allocations that took the slow path
 * @param freeBytes       bytes of free mapped blocks (pending frees included)
 * @param trackedStreams  streams with a free list of their own
 */
record RegionStats(long allocations, long frees, long cacheHits, long cacheMisses, long freeBytes, int trackedStreams) {
}
