package dev.vmmkit.core;

import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.DriverHandleCounts;

import java.util.Map;

/**
 * A consistent snapshot of an allocator's figures.
 *
 * @param allocations           successful allocate calls with size &gt; 0
 * @param frees                 successful deallocate calls of live addresses
 * @param liveBytes             bytes requested by live allocations
 * @param peakLiveBytes         highest {@code liveBytes} seen
 * @param reservedBytes         physical memory held: mapped plus pooled handles
 * @param peakReservedBytes     highest {@code reservedBytes} seen
 * @param cachedBytes           physical memory held by no live allocation (free mapped plus pooled)
 * @param cacheHits             allocations served without any driver call
 * @param cacheMisses           allocations that needed the slow path
 * @param outOfMemoryRecoveries times drain-and-retry turned an out-of-memory into a success
 * @param driverCalls           driver calls by kind since the allocator was made
 * @param driverHandles         the handles those calls touched, by kind and size (none when unknown)
 * @param zeroCopy              remaps that replaced copies, and copies that stayed copies
 * @param tags                  memory tags: paused bytes, each tag's pauses and resumes
 * @param freeWaitsGivenUp      requests past the budget that gave up waiting for memory freed by
 *                              cudaFree (the device still busy after the bound) and took other memory
 */
public record AllocatorStats(
        long allocations,
        long frees,
        long liveBytes,
        long peakLiveBytes,
        long reservedBytes,
        long peakReservedBytes,
        long cachedBytes,
        long cacheHits,
        long cacheMisses,
        long outOfMemoryRecoveries,
        Map<DriverCall, Long> driverCalls,
        DriverHandleCounts driverHandles,
        ZeroCopyStats zeroCopy,
        TagStats tags,
        long freeWaitsGivenUp) {

    public AllocatorStats {
        driverCalls = Map.copyOf(driverCalls);
        if (driverHandles == null) driverHandles = DriverHandleCounts.none();
        if (zeroCopy == null) zeroCopy = ZeroCopyStats.NONE;
        if (tags == null) tags = TagStats.NONE;
    }

    /** Figures of an allocator that never waits for cudaFree's memory. */
    public AllocatorStats(long allocations, long frees, long liveBytes, long peakLiveBytes, long reservedBytes,
                          long peakReservedBytes, long cachedBytes, long cacheHits, long cacheMisses,
                          long outOfMemoryRecoveries, Map<DriverCall, Long> driverCalls,
                          DriverHandleCounts driverHandles, ZeroCopyStats zeroCopy, TagStats tags) {
        this(allocations, frees, liveBytes, peakLiveBytes, reservedBytes, peakReservedBytes, cachedBytes, cacheHits,
                cacheMisses, outOfMemoryRecoveries, driverCalls, driverHandles, zeroCopy, tags, 0);
    }

    /** Figures of an allocator without memory tags. */
    public AllocatorStats(long allocations, long frees, long liveBytes, long peakLiveBytes, long reservedBytes,
                          long peakReservedBytes, long cachedBytes, long cacheHits, long cacheMisses,
                          long outOfMemoryRecoveries, Map<DriverCall, Long> driverCalls,
                          DriverHandleCounts driverHandles, ZeroCopyStats zeroCopy) {
        this(allocations, frees, liveBytes, peakLiveBytes, reservedBytes, peakReservedBytes, cachedBytes, cacheHits,
                cacheMisses, outOfMemoryRecoveries, driverCalls, driverHandles, zeroCopy, TagStats.NONE);
    }

    /** Figures of an allocator that never remaps. */
    public AllocatorStats(long allocations, long frees, long liveBytes, long peakLiveBytes, long reservedBytes,
                          long peakReservedBytes, long cachedBytes, long cacheHits, long cacheMisses,
                          long outOfMemoryRecoveries, Map<DriverCall, Long> driverCalls,
                          DriverHandleCounts driverHandles) {
        this(allocations, frees, liveBytes, peakLiveBytes, reservedBytes, peakReservedBytes, cachedBytes, cacheHits,
                cacheMisses, outOfMemoryRecoveries, driverCalls, driverHandles, ZeroCopyStats.NONE);
    }

    /** Figures of an allocator that does not count the handles its driver calls touch. */
    public AllocatorStats(long allocations, long frees, long liveBytes, long peakLiveBytes, long reservedBytes,
                          long peakReservedBytes, long cachedBytes, long cacheHits, long cacheMisses,
                          long outOfMemoryRecoveries, Map<DriverCall, Long> driverCalls) {
        this(allocations, frees, liveBytes, peakLiveBytes, reservedBytes, peakReservedBytes, cachedBytes, cacheHits,
                cacheMisses, outOfMemoryRecoveries, driverCalls, DriverHandleCounts.none(), ZeroCopyStats.NONE);
    }

    /** Peak physical memory held over peak bytes requested; 1.0 is perfect, 0 before any allocation. */
    public double fragmentationRatio() {
        return peakLiveBytes == 0 ? 0.0 : (double) peakReservedBytes / peakLiveBytes;
    }

    /** Share of allocations served without a driver call. */
    public double hitRate() {
        long all = cacheHits + cacheMisses;
        return all == 0 ? 0.0 : (double) cacheHits / all;
    }

    public long driverCalls(DriverCall kind) {
        return driverCalls.getOrDefault(kind, 0L);
    }
}
