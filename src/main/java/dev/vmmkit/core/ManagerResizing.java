package dev.vmmkit.core;

import dev.vmmkit.driver.CountingDriver;
import dev.vmmkit.driver.DeviceCopies;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.StreamEvents;

import java.util.Objects;
import java.util.concurrent.atomic.AtomicLong;

import static dev.vmmkit.core.DeviceMemoryResource.DEVICE_WIDE_STREAM;

/**
 * Zero-copy resizing across a manager's regions: {@link VmmManager#reallocate} and
 * {@link VmmManager#remapCopy} decide here between growing in place, remapping pages and a device
 * copy; each region's {@link RegionResizer} and {@link RegionRemapper} do the page work. Holds the cost model, the
 * whole-page rounding policy, one event to ask whether a stream is idle, and the counters.
 */
final class ManagerResizing {
    /**
     * By default no request is rounded to whole pages: an allocation may start in the last page of
     * the one before it, which keeps memory tight (the BERT trace's ratio, one handle per page: 1.020 unrounded, 1.023
     * when requests of 32 pages and more are rounded, 1.026 from 4 pages) but means such a pair
     * cannot be remapped (see {@link VmmManager#remapCopy}): pages may only move whole. {@link #useWholePagesFrom}
     * changes it; the shim's {@code VMM_ZERO_COPY=1} rounds every large request (0), so that every
     * large whole-buffer copy may become a remap.
     */
    static final int WHOLE_PAGES_NEVER = Integer.MAX_VALUE;

    private final VmmManager manager;
    private final CountingDriver driver;
    private volatile ResizeCostModel resizeCosts;
    private volatile int wholePagesFrom = WHOLE_PAGES_NEVER;
    private final Object idleEventLock = new Object();
    private long idleEvent;
    private final AtomicLong remaps = new AtomicLong();
    private final AtomicLong remappedBytes = new AtomicLong();
    private final AtomicLong copiesFallenBack = new AtomicLong();

    ManagerResizing(VmmManager manager, CountingDriver driver) {
        this.manager = manager;
        this.driver = driver;
        this.resizeCosts = ResizeCostModel.forDriver(driver.name());
    }

    /** True when a large request of {@code size} bytes gets a block of whole pages (see {@link #useWholePagesFrom}). */
    boolean wantsWholePages(long size, long pageBytes) {
        return size >= wholePagesFrom * pageBytes;
    }

    /** See {@link VmmManager#reallocate}. */
    long reallocate(long address, long newSize, long stream) {
        if (newSize <= 0) throw new IllegalArgumentException("new size must be positive, got " + newSize + " (to free, deallocate)");
        if (stream == StreamWaitList.NO_PENDING_WORK) throw new IllegalArgumentException("reserved stream value: " + stream);
        RegionHeap region = manager.regionOf(address);
        long oldSize = region == null ? -1 : region.sizeOf(address);
        if (oldSize < 0) throw new InvalidAddressException(address, "not a live allocation vmmkit returned");
        if (region.lostPages(address)) {
            throw new InvalidAddressException(address, "lost its first pages in a failed remap; it can only be freed");
        }
        boolean small = manager.isSmallSize(newSize);
        if (small == manager.isSmall(region) && manager.fitsDevice(newSize)) {
            try {
                if (resizeInPlace(region, address, newSize, small, stream)) return address;
            } catch (DriverException e) {
                if (!e.isOutOfMemory()) throw e;
                // As an allocation does (seed 001, 5.2): release what is cached, then retry once.
                manager.releaseCachedMemory();
                try {
                    if (resizeInPlace(region, address, newSize, small, stream)) return address;
                } catch (DriverException again) {
                    if (!again.isOutOfMemory()) throw again;
                    throw region.outOfMemory(newSize, again);
                }
            }
        }
        long moved = manager.allocate(newSize, stream);
        long orderStream = stream == DEVICE_WIDE_STREAM ? 0 : stream;
        try {
            if (newSize < oldSize || !tryRemap(moved, address, oldSize, orderStream)) {
                copiesFallenBack.incrementAndGet();
                copies().copy(moved, address, Math.min(oldSize, newSize), orderStream);
            }
        } catch (RuntimeException e) {
            manager.deallocate(moved, stream);
            throw e;
        }
        manager.deallocate(address, stream);
        return moved;
    }

    private boolean resizeInPlace(RegionHeap region, long address, long newSize, boolean small, long stream) {
        return region.resizer.resizeInPlace(address, manager.blockBytes(newSize, small), newSize, stream);
    }

    /** See {@link VmmManager#remapCopy}. */
    boolean remapCopy(long dst, long src, long count, long stream) {
        if (manager.regionOf(dst) == null || manager.regionOf(src) == null) return false;
        if (tryRemap(dst, src, count, stream == DEVICE_WIDE_STREAM ? 0 : stream)) return true;
        copiesFallenBack.incrementAndGet();
        return false;
    }

    /**
     * False once whole-buffer copies are to become remaps ({@link #useWholePagesFrom}): a remap moves
     * whole handles, and a loading request's one large handle, once freed and carved by smaller
     * requests, could be remapped by none of them. The regions then keep capped handles throughout.
     */
    boolean allowsOneHandlePerLoadingRequest() {
        return wholePagesFrom == WHOLE_PAGES_NEVER;
    }

    /** See {@link VmmManager#useWholePagesFrom}. */
    void useWholePagesFrom(int pages) {
        if (pages < 0) throw new IllegalArgumentException("pages must not be negative: " + pages);
        this.wholePagesFrom = pages;
    }

    /** See {@link VmmManager#useResizeCosts}. */
    void useResizeCosts(ResizeCostModel costs) {
        this.resizeCosts = Objects.requireNonNull(costs, "costs");
    }

    private boolean tryRemap(long dst, long src, long count, long stream) {
        RegionHeap region = manager.regionOf(dst);
        if (region == null || region != manager.regionOf(src)) return false;
        ResizeCostModel costs = resizeCosts;
        region.lock.lock();
        try {
            if (!region.remapper.canRemap(dst, src, count, costs)) return false;
        } finally {
            region.lock.unlock();
        }
        if (!earlierWorkIsDone(stream)) return false;
        region.lock.lock();
        try {
            if (!region.remapper.remap(dst, src, count, costs)) return false;
        } finally {
            region.lock.unlock();
        }
        remaps.incrementAndGet();
        remappedBytes.addAndGet(count);
        return true;
    }

    /** True when all work queued on {@code stream} so far has completed; asks an event, never waits. */
    private boolean earlierWorkIsDone(long stream) {
        StreamEvents events = driver.events();
        try {
            synchronized (idleEventLock) {
                if (idleEvent == 0) idleEvent = events.create();
                events.record(idleEvent, stream);
                return events.isComplete(idleEvent);
            }
        } catch (DriverException e) {
            return false; // unknown: copy, which keeps stream order by itself
        }
    }

    private DeviceCopies copies() {
        DeviceCopies copies = DeviceCopies.of(driver);
        if (copies == null) throw new UnsupportedOperationException("driver '" + driver.name() + "' cannot copy device memory");
        return copies;
    }

    /** The remap and copy counters. */
    ZeroCopyStats stats() {
        return new ZeroCopyStats(remaps.get(), remappedBytes.get(), copiesFallenBack.get());
    }

    /** Destroys the idle-stream event, if one was made. */
    void close() {
        synchronized (idleEventLock) {
            if (idleEvent != 0) {
                try {
                    driver.events().destroy(idleEvent);
                } catch (DriverException ignored) {
                    // closing anyway
                }
                idleEvent = 0;
            }
        }
    }
}
