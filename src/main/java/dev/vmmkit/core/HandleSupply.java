package dev.vmmkit.core;

import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.VmmDriver;

import java.util.function.BooleanSupplier;

/**
 * Where the handles of one {@link RegionHeap} come from and go back to: a run of pages to map gets
 * pooled handles first; then, only when physical memory would pass the budget, whole handles moved
 * out of free blocks (this region's, then the manager's other regions'); then new ones from the
 * driver, sized by the {@link HandleSizer}. Handles no longer mapped go back to the pool, or to the
 * driver when the pool is full.
 *
 * <p>Called without the region's lock (reclaiming takes it briefly).
 */
final class HandleSupply {

    private final RegionHeap region;
    private final VmmDriver driver;
    private final PhysicalPool pool;
    private final MemoryAccounting accounting;
    private final PhysicalBudget budget;
    private final HandleSizer sizer;
    private final VmmConfig config;
    private final RegionHeap.OtherRegions others;
    /**
     * A tag that keeps its contents gets handles of at most this size. Its pause copies the bytes
     * out, and releases each handle as soon as the copies from it have landed, while the later
     * ones still run: the driver then clears the memory given back during the backup (copies to
     * the host do not slow down meanwhile) instead of during the resume that follows, whose copies
     * to the device it slowed to 88-89 % of the bus (docs/memory-tags.md, "Releasing during the
     * backup"). A smaller last handle leaves less to clear when the resume starts; each handle
     * costs a map, a setAccess and an unmap more, tens of microseconds beside a 10 ms copy.
     */
    static final long KEPT_TAG_HANDLE_BYTES = 512L << 20;

    /** Set once, before the region is published, for a memory tag's region (see {@link #servesTag}). */
    private boolean servesTag;
    /** The largest handle this supply created; read by cache hits under the region's lock, written off it. */
    private volatile long largestCreatedBytes;
    /** The tag's setting, read when a handle is made: a kept tag's handles are capped. */
    private BooleanSupplier tagKeepsContents = () -> false;

    HandleSupply(RegionHeap region, VmmDriver driver, PhysicalPool pool, MemoryAccounting accounting,
                 PhysicalBudget budget, VmmConfig config, RegionHeap.OtherRegions others) {
        this.region = region;
        this.driver = driver;
        this.pool = pool;
        this.accounting = accounting;
        this.budget = budget;
        this.sizer = new HandleSizer(region.pageBytes, config.handleCapBytes());
        this.config = config;
        this.others = others;
    }

    /** Marks a memory tag's region, before any thread sees it; {@code keepsContents} reads the tag's setting. */
    void markServesTag(BooleanSupplier keepsContents) {
        servesTag = true;
        tagKeepsContents = keepsContents;
    }

    /**
     * The size of a tag's next new handle for a run with {@code missingBytes} unbacked: all of them,
     * as the driver allows (VMM_HANDLE_CAP still holds), but at most {@link #KEPT_TAG_HANDLE_BYTES}
     * when {@code kept}.
     */
    long tagHandleBytes(long missingBytes, boolean kept) {
        long bytes = sizer.firstBackingBytes(missingBytes);
        return kept ? Math.min(bytes, Math.max(region.pageBytes, KEPT_TAG_HANDLE_BYTES)) : bytes;
    }

    /**
     * True for a memory tag's region: each request backed from nothing gets one handle of its own
     * for all its pages, with no page mapped ahead and no handle taken from the pool or from other
     * regions, as cudaMalloc makes one allocation. A pause unmaps and releases every handle of the
     * tag (the driver charges both per handle), so few large handles make it as cheap as freeing
     * the tag's allocations natively; pages shared with other regions' caches would be stitched
     * into the tag as dozens of capped handles.
     */
    boolean servesTag() {
        return servesTag;
    }

    /**
     * Whether this region's new handles are exportable (for CUDA IPC): not a memory tag's. A
     * pause must give the tag's pages back to the device, which a mapping in an importing process
     * would keep alive, so a tag's memory is never shared; and the driver creates and releases
     * plain handles faster, which is what a pause and a resume pay for (docs/memory-tags.md).
     */
    boolean exportable() {
        return !servesTag;
    }

    /** The largest handle this supply has created ({@link OversizedFreeHandles} skips regions with none above a few pages). */
    long largestCreatedBytes() {
        return largestCreatedBytes;
    }

    /** The largest handle to create now for a request of {@code requested} bytes (mapping ahead goes up to it). */
    long handleCap(long requested) {
        return sizer.cap(budget.handlePeak(requested));
    }

    /** Unmapped handles covering {@code runBytes}, in mapping order, all of it for the request. */
    void acquire(long runBytes, long requested, HandleRun out) {
        acquire(runBytes, runBytes, 0, requested, out);
    }

    /**
     * Unmapped handles covering {@code runBytes}, in mapping order, where only the first
     * {@code neededBytes} hold the request and the rest is mapped ahead: no new handle spans both,
     * so the part mapped ahead stays whole handles that can move while the request lives. On a
     * failure every handle gathered goes back and {@code out} is empty.
     *
     * <p>First backing: when {@code oneHandleBytes} (the whole pages the request alone fills) is
     * large ({@link HandleSizer#backsLoadingWithOneHandle}) and the run is backed from nothing (no
     * pooled handle, no page to move: the budget has room), those pages get one handle, as large
     * as the driver allows, not the cap: a loading program's request then costs one create, map
     * and setAccess, as a native cudaMalloc does. Its last, shared page gets a handle of its own,
     * so a neighbour never pins the large one. When memory is recycled instead (pages must move, or
     * the request keeps live bytes within their peak: {@link PhysicalBudget#recycles}), the new
     * handles of a request that is not large are one page each ({@link HandleSizer#nextHandleBytes}).
     * Where the pages that must move are more than the whole free handles, the cap may be halved
     * first ({@link HandleSizer#movingFellShort}), for this request's handles and every later one;
     * where they fell far short, under a peak hint ({@link HandleSizer#fellFarShort}), this
     * request's new handles are one page each, large or not.
     *
     * <p>A memory tag's region ({@link #servesTag}) takes no pooled or moved handle: its run is new
     * handles, each as large as the driver allows (VMM_HANDLE_CAP still holds), so one per request,
     * or of {@link #KEPT_TAG_HANDLE_BYTES} when the tag keeps its contents.
     */
    void acquire(long runBytes, long neededBytes, long oneHandleBytes, long requested, HandleRun out) {
        try {
            long[] size = new long[1];
            while (!servesTag && out.totalBytes() < runBytes) {
                long h = pool.popAtMost(runBytes - out.totalBytes(), size);
                if (h == PhysicalPool.NO_HANDLE) break;
                out.add(h, size[0]);
            }
            long missing = runBytes - out.totalBytes();
            boolean fromNothing = out.count() == 0; // no pooled handle
            boolean recycled = false;
            boolean fellFarShort = false;
            if (missing > 0 && !servesTag) {
                long room = budget.room(requested);
                long mustMove = missing - room;
                boolean atBudget = mustMove > 0;
                recycled = atBudget || budget.recycles(requested);
                if (atBudget) fromNothing = false; // pages move: the budget has no room
                if (atBudget && movingPagesIsWorthIt(requested)) {
                    region.reclaimer.reclaimFreeHandles(mustMove, out, true);
                    long mustComeFromFree = runBytes - room; // pooled handles count as free memory
                    if (out.totalBytes() < mustComeFromFree) {
                        others.takeFreeHandles(region, mustComeFromFree - out.totalBytes(), out);
                        if (out.totalBytes() < mustComeFromFree) {
                            sizer.movingFellShort(requested, budget.handlePeak(requested));
                            fellFarShort = HandleSizer.fellFarShort(out.totalBytes(), mustComeFromFree,
                                    config.peakHintBytes() > 0);
                        }
                    }
                }
            }
            while (out.totalBytes() < runBytes) {
                long have = out.totalBytes();
                long bytes;
                if (servesTag) {
                    bytes = tagHandleBytes(runBytes - have, tagKeepsContents.getAsBoolean());
                } else if (fromNothing && have == 0 && sizer.backsLoadingWithOneHandle(oneHandleBytes)) {
                    bytes = sizer.firstBackingBytes(oneHandleBytes);
                } else {
                    long upTo = have < neededBytes ? neededBytes : runBytes;
                    bytes = sizer.nextHandleBytes(upTo - have, budget.handlePeak(requested), requested, recycled,
                            fellFarShort);
                }
                out.add(driver.create(bytes, exportable()), bytes);
                accounting.physicalCreated(bytes);
                if (bytes > largestCreatedBytes) largestCreatedBytes = bytes;
            }
        } catch (RuntimeException e) {
            for (int i = 0; i < out.count(); i++) poolOrRelease(out.handle(i), out.bytes(i));
            out.clear();
            throw e;
        }
    }

    /**
     * VMM_FRAG_RATIO: pages moved from free blocks are pieces of the request; a request more than
     * 1/fragRatio pages long would be stitched from too many of them (each costs a map, a setAccess
     * and an unmap), so it gets new pages instead and physical memory grows past the slack.
     */
    private boolean movingPagesIsWorthIt(long requested) {
        return region.pageBytes >= config.fragRatio() * requested;
    }

    /**
     * After a failed placement: pools (or releases) every handle of {@code run} that is not mapped.
     * False when one is still mapped, because its rollback unmap failed too.
     */
    boolean giveBackUnmapped(long from, HandleRun run) {
        boolean clean = true;
        long va = from;
        for (int i = 0; i < run.count(); i++) {
            if (region.pages.isMapped(va)) {
                clean = false;
            } else {
                poolOrRelease(run.handle(i), run.bytes(i));
            }
            va += run.bytes(i);
        }
        return clean;
    }

    /**
     * An unmapped handle goes to the pool, or is released when the pool is full (aliases may keep
     * it). A tag's handles are released: the pool serves every region, whose memory must stay
     * exportable.
     */
    void poolOrRelease(long handle, long bytes) {
        if (region.aliases.keepsWhileAliased(handle, bytes)) return;
        if (servesTag || !pool.push(bytes, handle)) release(handle, bytes);
    }

    /**
     * Releases an unmapped handle. If the driver refuses, the pool keeps the handle (past its limit)
     * so that a later drain or close retries, rather than losing it halfway through a loop.
     */
    void release(long handle, long bytes) {
        if (region.aliases.keepsWhileAliased(handle, bytes)) return;
        try {
            driver.release(handle);
            accounting.physicalReleased(bytes);
        } catch (DriverException e) {
            pool.keep(bytes, handle);
        }
    }

    /** Releases every handle the pool caches (those the driver refuses stay cached). */
    void drainPool() {
        pool.drain(driver, accounting);
    }
}
