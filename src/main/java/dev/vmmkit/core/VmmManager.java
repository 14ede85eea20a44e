package dev.vmmkit.core;

import dev.vmmkit.driver.CountingDriver;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.StreamEvents;
import dev.vmmkit.driver.VmmDriver;

import java.util.function.Function;

/**
 * The facade of one device's allocator (seed: VmmManager). It routes each request to a region by
 * size class and coordinates recovery; the regions, the pool and the accounting each guard their
 * own state, so the manager holds no lock on any allocate or free (seed 001, 5.4). Its regions,
 * made lazily and added on demand, are {@link ManagerRegions}.
 *
 * <p>Two size classes keep small, often long-lived tensors from pinning the pages of large ones:
 * requests up to {@link VmmConfig#smallLimitBytes()} share mapped pages in the small region, larger
 * ones live in the large region. Both are {@link RegionHeap}s. At the physical budget a small
 * request that misses its region's cache takes a free block of the large region instead of a page
 * ({@link SmallRequestOverflow}), and each region may take the other's whole free handles.
 *
 * <p>Streams are opaque {@code long}s. {@link #DEVICE_WIDE_STREAM} marks a free that must wait for
 * all earlier work on the device (cudaFree's guarantee); the manager's {@link DeviceWideFence}
 * provides that wait on a thread of its own.
 */
public final class VmmManager implements ManagedMemoryResource, MemoryTagControl {
    /** The caller's driver wrapped in a counter, so stats can report driver calls by kind. */
    private final CountingDriver driver;
    private final VmmConfig config;
    private final MemoryAccounting accounting = new MemoryAccounting();
    private final PhysicalPool pool;
    private final RegionHeap.OtherRegions others = new OtherRegionsOf(this);
    private final DeviceWideFence deviceFence;
    private final PeerAccess peerAccess;
    private final SharedPages sharedPages;

    /** The small and large size class's regions: made on the first allocation, added on demand. */
    private final ManagerRegions regions;

    private final AliasedHandles aliasedHandles = new AliasedHandles();
    /** Memory tags: allocations in regions of their own, paused and resumed by name. */
    private final MemoryTags tags;
    /** Reallocation and remap-instead-of-copy: the zero-copy decisions and their counters. */
    private final ManagerResizing resizing;

    /**
     * Whether a manager starts its fence's thread when it opens ({@link DeviceWideFence#start});
     * {@code -Dvmmkit.fence.startAtOpen=false} starts it at the first device-wide free instead, to
     * measure what starting it early saves ({@code scripts/gpu/cold-path.sh}'s FIRST_VARIANTS).
     */
    private static final boolean START_FENCE_AT_OPEN = !"false".equals(System.getProperty("vmmkit.fence.startAtOpen"));

    /** A manager over {@code driver}; nothing is reserved until the first allocation. The caller keeps owning the driver. */
    public VmmManager(VmmDriver driver, VmmConfig config) {
        this(driver, config, DeviceWideFence::new);
    }

    private VmmManager(VmmDriver driver, VmmConfig config, Function<StreamEvents, DeviceWideFence> fence) {
        this.driver = new CountingDriver(driver);
        this.config = config;
        this.pool = new PhysicalPool(config.maxCachedBytes());
        this.deviceFence = fence.apply(this.driver.events());
        this.regions = new ManagerRegions(this.driver, config, this::newRegion);
        this.tags = new MemoryTags(this.driver, regions::newTagRegion, this::releaseCachedMemory, deviceFence.captures());
        this.peerAccess = new PeerAccess(this.driver, () -> regions.allWith(tags.regions()));
        this.sharedPages = new SharedPages(this.driver, peerAccess, this::regionOf);
        this.resizing = new ManagerResizing(this, this.driver);
        if (START_FENCE_AT_OPEN) deviceFence.start();
    }

    /** Which peer devices may access this manager's memory (cudaDeviceEnablePeerAccess). */
    @Override
    public PeerAccess peerAccess() {
        return peerAccess;
    }

    /** Export of live allocations to other processes, and import of theirs (cudaIpc*MemHandle). */
    @Override
    public SharedPages sharedPages() {
        return sharedPages;
    }

    /**
     * A manager whose device-wide frees synchronise the device on the allocating thread, during
     * the slow path that asks: seeded tests repeat exactly, with no background thread in the way.
     */
    static VmmManager withFenceOnCallingThread(VmmDriver driver, VmmConfig config) {
        return new VmmManager(driver, config, DeviceWideFence::onCallingThread);
    }

    /**
     * A manager for replaying a recorded trace: its device-wide frees wait until the replay covers
     * them ({@link #replayedCovers}) or a request waits for them, with no thread of its own.
     */
    public static VmmManager forReplay(VmmDriver driver, VmmConfig config) {
        return new VmmManager(driver, config, DeviceWideFence::forReplay);
    }

    /**
     * Where a replay covers its device-wide frees, for a manager made by {@link #forReplay}; null
     * for any other, whose fence covers them itself.
     */
    public ReplayedCovers replayedCovers() {
        return deviceFence.replayedCovers();
    }

    @Override
    public DeviceWideFreeClock deviceWideFreeClock() {
        return new RegionFreeClock(this::regionOf, deviceFence);
    }

    /** A manager whose fence puts a lone free's synchronisation off for {@code graceNanos} (tests). */
    static VmmManager withFenceGrace(VmmDriver driver, VmmConfig config, long graceNanos) {
        return new VmmManager(driver, config, events -> new DeviceWideFence(events, graceNanos, SynchronisationPutOff.HOLD_NANOS));
    }

    /**
     * The CUDA stream captures under way, as the shim reports them: while one is, memory freed
     * device-wide is not synchronised for reuse ({@link StreamCaptures}).
     */
    @Override
    public StreamCaptures streamCaptures() {
        return deviceFence.captures();
    }

    /** The fence of device-wide frees (tests wait on it). */
    DeviceWideFence deviceWideFence() {
        return deviceFence;
    }

    @Override
    public long allocate(long size, long stream) {
        if (size == 0) return 0;
        if (size < 0) throw new IllegalArgumentException("negative size: " + size);
        if (stream == StreamWaitList.NO_PENDING_WORK) throw new IllegalArgumentException("reserved stream value: " + stream);
        regions.ensureInitialised();
        long deviceBytes = regions.deviceBytes();
        if (size > deviceBytes) {
            throw new OutOfDeviceMemoryException(size, accounting.liveBytes(), accounting.physicalBytes(),
                    deviceFreeBytes(), new IllegalArgumentException("larger than the device (" + deviceBytes + " bytes)"));
        }
        boolean small = size <= config.smallLimitBytes();
        long bytes = blockBytes(size, small);
        MemoryTag tag = tags.current();
        if (tag != null) return tags.allocate(tag, bytes, size, stream);
        RegionHeap[] ofClass = small ? regions.small() : regions.large();
        if (small) {
            long address = SmallRequestOverflow.allocateFromMappedMemory(ofClass, regions.large(), bytes, size, stream);
            if (address != 0) return address;
        }
        for (int i = ofClass.length - 1; i >= 0; i--) {
            try {
                // A small request has just missed every small region's cache: straight to the slow path.
                return small ? ofClass[i].allocateMissed(bytes, size, stream) : ofClass[i].allocate(bytes, size, stream);
            } catch (RegionHeap.RegionFullException full) {
                // try an older region, then add one
            }
        }
        return regions.add(small, bytes).allocate(bytes, size, stream);
    }

    @Override
    public void deallocate(long address, long stream) {
        if (address == 0) return;
        if (stream == StreamWaitList.NO_PENDING_WORK) throw new IllegalArgumentException("reserved stream value: " + stream);
        RegionHeap region = regionOf(address);
        if (region == null) {
            throw new InvalidAddressException(address, "not an address vmmkit returned");
        }
        region.free(address, stream);
    }

    /** The block a request of {@code size} gets: aligned, and whole pages for large requests when asked (see {@link #useWholePagesFrom}). */
    long blockBytes(long size, boolean small) {
        long alignment = config.alignmentBytes();
        long bytes = (size + alignment - 1) & -alignment;
        long pageBytes = regions.pageBytes();
        return !small && resizing.wantsWholePages(size, pageBytes) ? (bytes + pageBytes - 1) & -pageBytes : bytes;
    }

    /** True when a request of {@code size} bytes belongs to the small size class. */
    boolean isSmallSize(long size) {
        return size <= config.smallLimitBytes();
    }

    /** True when {@code size} bytes are no more than the device holds (a manager initialised by an allocation). */
    boolean fitsDevice(long size) {
        return size <= regions.deviceBytes();
    }

    /**
     * Resizes the live allocation at {@code address} to {@code newSize} bytes, keeping its contents
     * up to the smaller size, as C's realloc does; work on {@code stream} sees the result in order.
     * The address stays the same when the allocation shrinks or grows in place (the free space
     * behind it is taken, and new pages are mapped on the unmapped space after that). Otherwise the
     * contents move to a new allocation: by remapping its pages when {@link ResizeCostModel} says
     * that is cheaper and earlier work on the stream has completed, else by a device copy on
     * {@code stream}; the old address is then freed on {@code stream}. With
     * {@link #DEVICE_WIDE_STREAM} the copy runs on the default stream and the old address is freed
     * as cudaFree frees.
     *
     * @return the address of the resized allocation
     * @throws InvalidAddressException  when {@code address} is not a live allocation of this manager; nothing changes
     * @throws IllegalArgumentException when {@code newSize} is not positive (use {@link #deallocate}); nothing changes
     * @throws OutOfDeviceMemoryException when there is no memory for the larger size; the allocation is unchanged
     * @throws RemapLostPagesException when the move's remap failed twice (see {@link #remapCopy}); the allocation is unchanged
     */
    @Override
    public long reallocate(long address, long newSize, long stream) {
        tags.refuseWhilePaused(address);
        return resizing.reallocate(address, newSize, stream);
    }

    /**
     * The seed's VmmOptimizer: an interposed device-to-device copy of {@code count} bytes from
     * {@code src} to {@code dst} on {@code stream}, done by remapping instead when that is safe and
     * cheaper: {@code src} is a whole live allocation ({@code count} is its size), {@code dst} a live
     * one at least as large, in the same region, both starting on a page, the cost model favours
     * remapping, and the work queued on {@code stream} before the copy has completed (checked with an
     * event, never waited for). Then the destination's pages go to the pool, the source's are mapped
     * at the destination, and the source aliases the destination until it is freed (a stray read
     * through it reads valid memory). Returns false, changing nothing, when the caller must copy.
     *
     * @throws RemapLostPagesException when the driver failed the remap and then failed to map the
     *         destination's own pages back: the destination has no first pages, so no copy may go
     *         there; it can only be freed
     */
    @Override
    public boolean remapCopy(long dst, long src, long count, long stream) {
        // A tag's pages are released and made anew by pause and resume: they take no aliases.
        if (tags.regionOf(dst) != null || tags.regionOf(src) != null) return false;
        return resizing.remapCopy(dst, src, count, stream);
    }

    /**
     * Large requests of at least {@code pages} pages get blocks of whole pages, starting on a page,
     * from now on (see {@link ManagerResizing#WHOLE_PAGES_NEVER}); 0 rounds every large request, which lets every whole-buffer copy of
     * a large buffer be remapped, at some cost in memory.
     */
    public void useWholePagesFrom(int pages) {
        resizing.useWholePagesFrom(pages);
    }

    /** Replaces the figures the remap-or-copy decision uses, e.g. with latencies measured on this device. */
    public void useResizeCosts(ResizeCostModel costs) {
        resizing.useResizeCosts(costs);
    }

    /** True when {@code region} is one of the small size class's. */
    boolean isSmall(RegionHeap region) {
        return regions.isSmall(region);
    }

    @Override
    public boolean owns(long address) {
        return regionOf(address) != null;
    }

    /** The requested size of the live allocation that starts at {@code address}, or -1. */
    @Override
    public long sizeOf(long address) {
        RegionHeap region = regionOf(address);
        return region == null ? -1 : region.sizeOf(address);
    }

    @Override
    public long liveAllocationHolding(long address) {
        RegionHeap region = regionOf(address);
        return region == null ? -1 : region.views.liveAllocationHolding(address);
    }

    @Override
    public AllocatorStats stats() {
        long allocations = 0;
        long frees = 0;
        long hits = 0;
        long misses = 0;
        long mappedFree = 0;
        for (RegionStats r : regionStats()) {
            allocations += r.allocations();
            frees += r.frees();
            hits += r.cacheHits();
            misses += r.cacheMisses();
            mappedFree += r.freeBytes();
        }
        return new AllocatorStats(allocations, frees, accounting.liveBytes(), accounting.peakLiveBytes(),
                accounting.physicalBytes(), accounting.peakPhysicalBytes(), mappedFree + pool.cachedBytes(),
                hits, misses, accounting.outOfMemoryRecoveries(), driver.counts().byCall(), driver.handleCounts(),
                resizing.stats(), tags.stats(), deviceFence.givenUpWaits().inAll());
    }

    @Override
    public long reservedBytes() {
        return accounting.physicalBytes();
    }

    /** Each region's counters, small regions first. */
    java.util.List<RegionStats> regionStats() {
        java.util.List<RegionStats> all = new java.util.ArrayList<>();
        for (RegionHeap r : regions.all()) all.add(r.stats());
        for (RegionHeap r : tags.regions()) all.add(r.stats());
        return all;
    }

    /** Every block of every region, each region read under its lock (for reports: it allocates). */
    public BlockMap blockMap() {
        java.util.List<BlockMap.Region> maps = new java.util.ArrayList<>();
        for (RegionHeap r : regions.allWith(tags.regions())) maps.add(r.views.blockMap());
        return new BlockMap(maps);
    }

    /** Releases every cached physical handle that no live allocation needs; returns the bytes released. */
    public long drain() {
        return drain(false);
    }


    /**
     * Like {@link #drain()}, but first waits for frees still pending on their streams (device-wide
     * ones wait for a device synchronisation), so everything freed so far is released too.
     */
    @Override
    public long releaseCachedMemory() {
        return drain(true);
    }

    private long drain(boolean waitForFrees) {
        long before = accounting.physicalBytes();
        for (RegionHeap r : regions.all()) r.releaseCachedMemory(waitForFrees);
        tags.releaseCachedMemory(waitForFrees);
        pool.drain(driver, accounting);
        return before - accounting.physicalBytes();
    }

    /**
     * Unmaps and releases everything, live allocations included, after memory freed device-wide
     * has waited for the device; stops the fence's thread. The driver stays open.
     */
    @Override
    public void close() {
        regions.closeOnce(this::closeEverything);
    }

    /** Runs once, with no region added meanwhile. */
    private void closeEverything() {
        try {
            sharedPages.close();
            tags.close();
            regions.closeRegions();
            try {
                pool.drain(driver, accounting);
            } catch (DriverException ignored) {
                // closing anyway
            }
            resizing.close();
        } finally {
            deviceFence.close(); // after the regions: their close waits on it
        }
    }


    /** The region whose reserved range holds {@code address}, or null. */
    RegionHeap regionOf(long address) {
        RegionHeap region = regions.holding(address);
        return region != null ? region : tags.regionOf(address);
    }

    // ---------------------------------------------------------------- memory tags (MemoryTagControl says what each does)

    @Override
    public void beginTagRegion(String tag, boolean keepContents) {
        tags.begin(tag, keepContents);
    }

    @Override
    public void beginUntaggedRegion() {
        tags.beginUntagged();
    }

    @Override
    public void endTagRegion() {
        tags.end();
    }

    @Override
    public void setDefaultTag(String tag, boolean keepContents) {
        tags.setDefault(tag, keepContents);
    }

    @Override
    public void pause(String tag) {
        regions.ensureInitialised();
        tags.pause(tag);
    }

    @Override
    public void resume(String tag) {
        regions.ensureInitialised();
        tags.resume(tag);
    }

    @Override
    public void keepContents(String tag, boolean keepContents) {
        tags.keepContents(tag, keepContents);
    }

    @Override
    public boolean knowsTag(String tag) {
        return tags.knows(tag);
    }

    @Override
    public long hostBytesPinned() {
        return tags.hostBytesPinned();
    }

    @Override
    public long hostBytesKept() {
        return tags.hostBytesKept();
    }

    @Override
    public void freeKeptHostMemory() {
        tags.freeKeptHostMemory();
    }

    /**
     * Pins up to {@code limitBytes} of host memory (all chunks held for tags counted) in the
     * background while tags that keep their contents are allocated, so that their first pause
     * copies at the bus's speed; 0 (the default here; {@code VMM_PIN_AHEAD} under the shim) turns
     * it off. See {@link PinAheadSetting}.
     */
    public void usePinAhead(long limitBytes) {
        tags.pinAhead(limitBytes);
    }

    /** Waits until pinning ahead has nothing left to do (tests). */
    void awaitPinAhead() throws InterruptedException {
        tags.awaitPinAhead();
    }

    @Override
    public MemoryTagControl tagControl() {
        return this;
    }

    /** A region over a reserved range, sharing this manager's driver, pool, accounting, fence and peers. */
    private RegionHeap newRegion(String name, long base, long span, long pageBytes) {
        return new RegionHeap(name, base, span, pageBytes, driver, pool, accounting, config, others, deviceFence,
                peerAccess, aliasedHandles, resizing::allowsOneHandlePerLoadingRequest);
    }

    /** What a region may take from the other regions of this manager. */
    private record OtherRegionsOf(VmmManager manager) implements RegionHeap.OtherRegions {
        @Override
        public void takeFreeHandles(RegionHeap requester, long wantedBytes, HandleRun out) {
            long before = out.totalBytes();
            for (RegionHeap r : manager.regions.all()) {
                long stillWanted = wantedBytes - (out.totalBytes() - before);
                if (r == requester || stillWanted <= 0) continue;
                // Promote first: a region whose cache never misses never promotes its own frees, and
                // memory freed on a stream is reclaimable only once promoted. Without this, a
                // generation run's early KV caches kept their pages in the small region for good.
                r.reclaimer.reclaimFreeHandles(stillWanted, out, true);
            }
        }

        @Override
        public void releaseCachedMemory(RegionHeap requester) {
            for (RegionHeap r : manager.regions.all()) {
                if (r != requester) r.releaseCachedMemory(true);
            }
            manager.tags.releaseIdleCachedMemory();
        }
    }

    /** Every region, small ones first (tests count their mapped runs). */
    RegionHeap[] regionsForTest() {
        return regions.all();
    }

    private long deviceFreeBytes() {
        try {
            return driver.memoryInfo().freeBytes();
        } catch (DriverException e) {
            return -1;
        }
    }

}
