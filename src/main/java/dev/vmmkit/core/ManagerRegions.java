package dev.vmmkit.core;

import dev.vmmkit.driver.CountingDriver;

import java.util.Arrays;

/**
 * The regions of one {@link VmmManager}: the small and the large size class's, made on the first
 * allocation (when the device's granularity and size are known) and added when every region of a
 * class is full, a memory tag's own regions, and which region holds an address. Readers see the
 * arrays without a lock: a new region is published by replacing its array. The one lock
 * serialises initialisation, adding a region and closing, all once in a long while; once closed,
 * no region is added.
 */
final class ManagerRegions {
    /** Builds a region over a range already reserved; the manager supplies what all its regions share. */
    @FunctionalInterface
    interface RegionFactory {
        RegionHeap make(String name, long base, long span, long pageBytes);
    }

    private final CountingDriver driver;
    private final VmmConfig config;
    private final RegionFactory factory;
    private final Object lock = new Object();

    private volatile RegionHeap[] small = new RegionHeap[0];
    private volatile RegionHeap[] large = new RegionHeap[0];
    private boolean closed;
    // Written once under the lock before the arrays are published; read after ensureInitialised.
    private long pageBytes;
    private long regionSpan;
    private long deviceBytes;

    ManagerRegions(CountingDriver driver, VmmConfig config, RegionFactory factory) {
        this.driver = driver;
        this.config = config;
        this.factory = factory;
    }

    /** Makes the first small and large region unless they exist; throws once closed. */
    void ensureInitialised() {
        if (small.length > 0 && large.length > 0) return;
        synchronized (lock) {
            if (closed) throw new IllegalStateException("manager is closed");
            if (large.length > 0) return;
            long granularity = driver.granularity();
            long chunk = config.chunkBytes() == 0 ? granularity : config.chunkBytes();
            if (chunk % granularity != 0 || Long.bitCount(chunk) != 1) {
                throw new IllegalArgumentException("chunk size " + chunk + " must be a power-of-two multiple of the granularity " + granularity);
            }
            pageBytes = chunk;
            deviceBytes = driver.memoryInfo().totalBytes();
            long span = config.addressSpaceBytes() != 0 ? config.addressSpaceBytes() : 2 * deviceBytes;
            regionSpan = Math.max(pageBytes, (span + pageBytes - 1) & -pageBytes);
            large = new RegionHeap[]{newRegion("large region", regionSpan)};
            small = new RegionHeap[]{newRegion("small region", regionSpan)};
        }
    }

    /** The page size every region maps in (known once initialised). */
    long pageBytes() {
        return pageBytes;
    }

    /** The device's total memory (known once initialised). */
    long deviceBytes() {
        return deviceBytes;
    }

    /** The small size class's regions, oldest first. */
    RegionHeap[] small() {
        return small;
    }

    /** The large size class's regions, oldest first. */
    RegionHeap[] large() {
        return large;
    }

    /** A new region of the small or large class, large enough for a block of {@code bytes}, added after the others. */
    RegionHeap add(boolean toSmall, long bytes) {
        synchronized (lock) {
            if (closed) throw new IllegalStateException("manager is closed");
            long span = Math.max(regionSpan, (bytes + pageBytes - 1) & -pageBytes);
            RegionHeap region = newRegion(toSmall ? "small region" : "large region", span);
            RegionHeap[] old = toSmall ? small : large;
            RegionHeap[] grown = Arrays.copyOf(old, old.length + 1);
            grown[old.length] = region;
            if (toSmall) small = grown;
            else large = grown;
            return region;
        }
    }

    /** A new region for memory tag {@code tag}, large enough for a block of {@code bytes}; {@link MemoryTags} keeps it. */
    RegionHeap newTagRegion(MemoryTag tag, long bytes) {
        synchronized (lock) {
            if (closed) throw new IllegalStateException("manager is closed");
            RegionHeap region = newRegion("region of tag '" + tag.name + "'", Math.max(regionSpan, (bytes + pageBytes - 1) & -pageBytes));
            region.handles.markServesTag(tag::keepsContents);
            return region;
        }
    }

    private RegionHeap newRegion(String name, long span) {
        long base = driver.reserve(span, pageBytes);
        return factory.make(name, base, span, pageBytes);
    }

    /** The size-class region (no tag's) whose reserved range holds {@code address}, or null. */
    RegionHeap holding(long address) {
        for (RegionHeap r : large) if (r.contains(address)) return r;
        for (RegionHeap r : small) if (r.contains(address)) return r;
        return null;
    }

    /** True when {@code region} is one of the small size class's. */
    boolean isSmall(RegionHeap region) {
        for (RegionHeap r : small) if (r == region) return true;
        return false;
    }

    /** Every size-class region, small ones first. */
    RegionHeap[] all() {
        return joined(small, large);
    }

    /** Every size-class region, small ones first, then {@code tagRegions}. */
    RegionHeap[] allWith(RegionHeap[] tagRegions) {
        return joined(all(), tagRegions);
    }

    private static RegionHeap[] joined(RegionHeap[] first, RegionHeap[] second) {
        RegionHeap[] all = Arrays.copyOf(first, first.length + second.length);
        System.arraycopy(second, 0, all, first.length, second.length);
        return all;
    }

    /**
     * Closes the set once: marks it closed, so that no region is added from now on, and runs
     * {@code shutdown} under the lock (it closes the regions with {@link #closeRegions}); a
     * later call does nothing.
     */
    void closeOnce(Runnable shutdown) {
        synchronized (lock) {
            if (closed) return;
            closed = true;
            shutdown.run();
        }
    }

    /** Closes every size-class region (live allocations included) and forgets them. */
    void closeRegions() {
        for (RegionHeap[] regions : new RegionHeap[][]{small, large}) {
            for (RegionHeap r : regions) r.close();
        }
        small = new RegionHeap[0];
        large = new RegionHeap[0];
    }
}
