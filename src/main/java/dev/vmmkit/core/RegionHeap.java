package dev.vmmkit.core;

import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.VmmDriver;
import org.agrona.collections.Long2LongHashMap;

import java.util.concurrent.locks.ReentrantLock;

import static dev.vmmkit.core.BlockTable.FREE;
import static dev.vmmkit.core.BlockTable.LIVE;
import static dev.vmmkit.core.BlockTable.NONE;
import static dev.vmmkit.core.BlockTable.UNMAPPED;
import static dev.vmmkit.core.StreamWaitList.NO_PENDING_WORK;

/**
 * One reserved virtual range of one size class, carved into blocks: where each request goes.
 *
 * <p>The invariant that makes the hot path cheap: every byte of a FREE block is mapped. So an
 * allocation that fits a FREE block (best fit in {@link StreamFreeLists}) and a free (coalescing
 * with its address neighbours) are pure bookkeeping, with no driver call (seed 004, case 2).
 *
 * <p>The slow path places a request on UNMAPPED space (extending a FREE block just below it when
 * there is one, seed 004 case 3) and backs the missing pages with handles from the pool, moved
 * out of free blocks, or newly created ({@link #acquireHandles}); {@link PageTable} maps them.
 *
 * <p>The lock guards bookkeeping only. A slow path takes the blocks it will change out of every
 * tree under the lock (they read {@link BlockTable#IN_FLIGHT}, so coalescing leaves them alone),
 * calls the driver without the lock, and takes the lock again to finish or roll back. So frees and
 * cache hits never wait behind create, map, setAccess, unmap, release or a wait for pending frees.
 * No thread ever holds two regions' locks.
 */
final class RegionHeap {
    /** The longest an allocation waits for pending frees before it maps more memory instead. */
    static final long PENDING_FREE_WAIT_NANOS = 1_000_000;

    /** The manager's other regions, which may give up the memory they cache. */
    interface OtherRegions {
        /** Moves whole free handles of up to {@code wantedBytes} from the other regions into {@code out}. */
        void takeFreeHandles(RegionHeap requester, long wantedBytes, HandleRun out);

        /** Releases everything the other regions cache, after their pending frees (out-of-memory recovery). */
        void releaseCachedMemory(RegionHeap requester);
    }

    private final String name;
    private final long base;
    private final long span;
    final long pageBytes;
    final VmmDriver driver;
    private final PhysicalPool pool;
    final MemoryAccounting accounting;
    private final VmmConfig config;
    private final OtherRegions others;

    final ReentrantLock lock = new ReentrantLock();
    /** Placements and reclaims whose driver calls run off the lock; a peer grant waits for none. */
    final InFlightWork inFlight = new InFlightWork(lock);
    final BlockTable blocks = new BlockTable(1024);
    final SizeTree unmapped = new SizeTree(blocks);
    final StreamFreeLists freeLists;
    final PageTable pages;
    private final HandleSizer sizer;
    /** The manager's physical budget (every region of a manager reckons the same one). */
    final PhysicalBudget budget;
    /** Where slow-path placements go. */
    private final PlacementChooser placer;
    /** Which free handles move when pages must. */
    private final ReclaimPlanner reclaimPlanner;
    final Long2LongHashMap liveByAddress = new Long2LongHashMap(NONE);
    /** Growing, shrinking and remapping live allocations; owns the bookkeeping of aliases. */
    final RegionResizer resizer;
    /** Read-only views taken under the lock: an allocation's handles for export, every block for reports. */
    final RegionViews views;

    // Counters, read under the lock by stats().
    private long allocations;
    private long frees;
    private long cacheHits;
    private long cacheMisses;

    RegionHeap(String name, long base, long span, long pageBytes, VmmDriver driver, PhysicalPool pool,
               MemoryAccounting accounting, VmmConfig config, OtherRegions others, DeviceWideFence deviceFence,
               PeerAccess access, AliasedHandles aliasedHandles) {
        this.name = name;
        this.base = base;
        this.span = span;
        this.pageBytes = pageBytes;
        this.driver = driver;
        this.pool = pool;
        this.accounting = accounting;
        this.config = config;
        this.others = others;
        this.freeLists = new StreamFreeLists(blocks, driver.events(), deviceFence);
        this.pages = new PageTable(driver, access, base, span, pageBytes);
        this.sizer = new HandleSizer(pageBytes, config.handleCapBytes());
        this.budget = new PhysicalBudget(accounting, config, pageBytes);
        this.resizer = new RegionResizer(this, aliasedHandles);
        this.views = new RegionViews(this, name, base, span);
        this.placer = new PlacementChooser(this);
        this.reclaimPlanner = new ReclaimPlanner(blocks, freeLists, pages);
        unmapped.insert(blocks.newBlock(UNMAPPED, base, span));
    }

    boolean contains(long address) {
        return address - base >= 0 && address - base < span;
    }

    // ---------------------------------------------------------------- hot path

    /** Allocates {@code bytes} (already aligned) for {@code stream}; returns the address. */
    long allocate(long bytes, long requested, long stream) {
        long address = allocateCached(bytes, requested, stream);
        return address != 0 ? address : allocateMissed(bytes, requested, stream);
    }

    /** The slow path of a request that {@link #allocateCached} could not serve just now: a miss. */
    long allocateMissed(long bytes, long requested, long stream) {
        lock.lock();
        try {
            cacheMisses++;
        } finally {
            lock.unlock();
        }
        return allocateSlow(bytes, requested, stream);
    }

    /**
     * Allocates {@code bytes} from mapped free memory only: a fit (a cache hit, no driver call), else
     * a fit after promoting completed frees (a miss: events were asked); 0 when nothing fits.
     */
    long allocateCached(long bytes, long requested, long stream) {
        lock.lock();
        try {
            int id = freeLists.bestFit(bytes, stream);
            if (id != NONE) {
                cacheHits++;
                return carveLive(id, bytes, requested);
            }
            resizer.unmapRetiredAliases();
            if (freeLists.promoteCompleted()) id = freeLists.bestFit(bytes, stream);
            if (id == NONE) return 0;
            cacheMisses++;
            return carveLive(id, bytes, requested);
        } finally {
            lock.unlock();
        }
    }

    /** Frees a live allocation; work on {@code stream} may still use it. Returns the requested size. */
    long free(long address, long stream) {
        lock.lock();
        try {
            int id = (int) liveByAddress.remove(address);
            if (id == NONE) {
                throw new InvalidAddressException(address, "not a live allocation of " + name
                        + " (double free, or a pointer vmmkit did not return)");
            }
            long requested = blocks.requestedOrStream[id];
            frees++;
            accounting.freed(requested);
            if (resizer.retiresAlias(id, stream)) return requested;
            blocks.kind[id] = FREE;
            blocks.requestedOrStream[id] = stream;
            blocks.freeSequence[id] = freeLists.nextFreeSequence();
            freeLists.add(id);
            return requested;
        } finally {
            lock.unlock();
        }
    }

    /** The requested size of the live allocation at {@code address}, or -1. */
    long sizeOf(long address) {
        lock.lock();
        try {
            int id = (int) liveByAddress.get(address);
            return id == NONE ? -1 : blocks.requestedOrStream[id];
        } finally {
            lock.unlock();
        }
    }

    /** Turns the first {@code bytes} of FREE block {@code id} (in its tree) into a live allocation. Lock held. */
    private long carveLive(int id, long bytes, long requested) {
        freeLists.remove(id);
        return takeLive(id, bytes, requested);
    }

    /** As {@link #carveLive}, for a FREE block in no tree. Lock held. */
    private long takeLive(int id, long bytes, long requested) {
        blocks.kind[id] = LIVE;
        long extra = blocks.size[id] - bytes;
        if (extra > 0) {
            int rest = blocks.newBlock(FREE, blocks.address[id] + bytes, extra);
            blocks.requestedOrStream[rest] = blocks.requestedOrStream[id];
            blocks.freeSequence[rest] = blocks.freeSequence[id];
            blocks.linkAfter(id, rest);
            blocks.size[id] = bytes;
            freeLists.add(rest);
        }
        blocks.requestedOrStream[id] = requested;
        liveByAddress.put(blocks.address[id], id);
        allocations++;
        accounting.allocated(requested);
        return blocks.address[id];
    }

    /** A cached block that fits, taken under the lock; 0 when none does. */
    private long tryCachedFit(long bytes, long requested, long stream) {
        lock.lock();
        try {
            int id = freeLists.bestFit(bytes, stream);
            return id == NONE ? 0 : carveLive(id, bytes, requested);
        } finally {
            lock.unlock();
        }
    }

    // ---------------------------------------------------------------- slow path (lock not held)

    private long allocateSlow(long bytes, long requested, long stream) {
        trimToBudget(requested);
        if (budget.wouldExceed(bytes, requested) && waitForPendingFrees(PENDING_FREE_WAIT_NANOS)) {
            long address = tryCachedFit(bytes, requested, stream);
            if (address != 0) return address;
        }
        try {
            return placeOnNewMemory(bytes, requested, stream);
        } catch (DriverException e) {
            if (!e.isOutOfMemory()) throw e;
            // Seed 001, 5.2: drain what is cached, then retry once, on fresh address space.
            releaseCachedMemory(true);
            others.releaseCachedMemory(this);
            try {
                // Waiting for pending frees may have made a free block that fits: use it first.
                long address = tryCachedFit(bytes, requested, stream);
                if (address == 0) address = placeOnNewMemory(bytes, requested, stream);
                accounting.recoveredFromOutOfMemory();
                return address;
            } catch (DriverException again) {
                if (!again.isOutOfMemory()) throw again;
                throw outOfMemory(requested, again);
            } catch (RegionFullException setAside) {
                // The failed attempt's pages were set aside (its undo failed too) and no space is left
                // to retry on: report the out-of-memory rather than leak this internal signal.
                throw outOfMemory(requested, e);
            }
        }
    }

    /**
     * Gives back free handles while physical memory is over the budget. It gets there only when
     * moving pages fell short (free pages were stranded in partly live handles) and new ones were
     * made; trimming at the next miss keeps such overshoots from adding up, so the peak of physical
     * memory stays within one overshoot of the budget.
     */
    private void trimToBudget(long requested) {
        long excess = budget.excess(requested);
        if (excess <= 0) return;
        HandleRun freed = new HandleRun();
        reclaimFreeHandles(excess, freed, true);
        for (int i = 0; i < freed.count(); i++) release(freed.handle(i), freed.bytes(i));
    }

    /**
     * Memory freed but still waiting for earlier device work (a cudaFree's device-wide
     * synchronisation, another stream's event) is often about to become usable. Waits for it
     * without the lock: at most {@code timeoutNanos} in all (forever when negative), so a
     * long-running kernel costs memory, not time. Returns true if any free became reusable.
     */
    private boolean waitForPendingFrees(long timeoutNanos) {
        StreamFreeLists.Waits waits;
        lock.lock();
        try {
            waits = freeLists.prepareWaits(timeoutNanos < 0);
        } finally {
            lock.unlock();
        }
        boolean promoted = false;
        try {
            freeLists.awaitOffLock(waits, timeoutNanos);
        } finally {
            lock.lock();
            try {
                promoted = freeLists.promoteWaited(waits);
            } finally {
                lock.unlock();
            }
        }
        return promoted;
    }

    OutOfDeviceMemoryException outOfMemory(long requested, Throwable cause) {
        long free;
        try {
            free = driver.memoryInfo().freeBytes();
        } catch (DriverException e) {
            free = -1;
        }
        return new OutOfDeviceMemoryException(requested, accounting.liveBytes(), accounting.physicalBytes(), free, cause);
    }

    /**
     * Places {@code bytes} on unmapped space, where {@link PlacementChooser} says, and maps the
     * pages it needs, calling the driver without the lock. If mapping fails, every handle mapped
     * here is unmapped again and pooled, so bookkeeping and driver state stay equal; the address
     * range goes back to the unmapped tree (dirty VA discard, seed 001 5.3), or is set aside when
     * an unmap failed too.
     */
    private long placeOnNewMemory(long bytes, long requested, long stream) {
        PlacementChooser.Placement placement;
        lock.lock();
        try {
            // The lock was left since the cache missed: frees of other threads may have made a free
            // block that fits now (the block below the unmapped space may even have grown past the
            // request, which would leave nothing to map). Take such a block first.
            int fit = freeLists.bestFit(bytes, stream);
            if (fit != NONE) return carveLive(fit, bytes, requested);
            boolean over = budget.wouldExceed(bytes, requested);
            long room = budget.room(requested);
            // Within the budget, map ahead up to one handle cap: later requests land there without
            // a driver call. Those pages get handles of their own, so they can still move while the
            // request lives.
            long ahead = Math.min(room, sizer.cap(budget.peak(requested)));
            placement = placer.take(bytes, stream, over, ahead);
            inFlight.begin();
        } finally {
            lock.unlock();
        }

        HandleRun handles = new HandleRun();
        try {
            acquireHandles(placement.mapTo - placement.mapFrom, placement.neededTo - placement.mapFrom, requested, handles);
            pages.mapRun(placement.mapFrom, handles);
        } catch (RuntimeException e) {
            boolean clean = giveBackUnmapped(placement.mapFrom, handles);
            lock.lock();
            try {
                placer.giveBack(placement, clean); // not clean: the pages stay IN_FLIGHT for good (set aside)
                inFlight.end();
            } finally {
                lock.unlock();
            }
            throw e;
        }

        lock.lock();
        try {
            int id = placer.join(placement);
            inFlight.end();
            return takeLive(id, bytes, requested);
        } finally {
            lock.unlock();
        }
    }

    /** Splits UNMAPPED block {@code u} (in no tree) at {@code at}; the part after it goes back to the tree. */
    void splitOffUnmappedTail(int u, long at) {
        long uEnd = blocks.end(u);
        if (uEnd > at) {
            int rest = blocks.newBlock(UNMAPPED, at, uEnd - at);
            blocks.linkAfter(u, rest);
            blocks.size[u] = at - blocks.address[u];
            unmapped.insert(rest);
        }
    }

    /**
     * After a failed placement: pools (or releases) every handle of {@code run} that is not mapped.
     * False when one is still mapped, because its rollback unmap failed too.
     */
    boolean giveBackUnmapped(long from, HandleRun run) {
        boolean clean = true;
        long va = from;
        for (int i = 0; i < run.count(); i++) {
            if (pages.isMapped(va)) {
                clean = false;
            } else {
                poolOrRelease(run.handle(i), run.bytes(i));
            }
            va += run.bytes(i);
        }
        return clean;
    }

    /** Gives back a block taken for a placement, merging it with neighbours freed meanwhile. Lock held. */
    void reattachFree(int id) {
        blocks.kind[id] = FREE;
        freeLists.add(id);
    }

    /** Returns IN_FLIGHT block {@code id} to the unmapped tree. Lock held. */
    void restoreUnmapped(int id) {
        blocks.kind[id] = UNMAPPED;
        unmapped.insert(coalesceUnmapped(id));
    }

    /**
     * Gets unmapped handles covering {@code runBytes}, in mapping order: pooled ones first; then,
     * only when physical memory would pass the budget, whole handles moved out of free blocks (this
     * region's, then the others'); then new ones, each as large as the rest of the run and the
     * {@link HandleSizer}'s cap allow. Lock not held.
     */
    void acquireHandles(long runBytes, long requested, HandleRun out) {
        acquireHandles(runBytes, runBytes, requested, out);
    }

    /**
     * As {@link #acquireHandles(long, long, HandleRun)}, where only the first {@code neededBytes}
     * hold the request and the rest is mapped ahead: no new handle spans both, so the part mapped
     * ahead stays whole handles that can move while the request lives.
     */
    void acquireHandles(long runBytes, long neededBytes, long requested, HandleRun out) {
        try {
            long[] size = new long[1];
            while (out.totalBytes() < runBytes) {
                long h = pool.popAtMost(runBytes - out.totalBytes(), size);
                if (h == PhysicalPool.NO_HANDLE) break;
                out.add(h, size[0]);
            }
            long missing = runBytes - out.totalBytes();
            if (missing > 0) {
                long room = budget.room(requested);
                long mustMove = missing - room;
                if (mustMove > 0 && movingPagesIsWorthIt(requested)) {
                    reclaimFreeHandles(mustMove, out, true);
                    long stillToMove = runBytes - room - out.totalBytes();
                    if (stillToMove > 0) others.takeFreeHandles(this, stillToMove, out);
                }
            }
            while (out.totalBytes() < runBytes) {
                long upTo = out.totalBytes() < neededBytes ? neededBytes : runBytes;
                long bytes = sizer.nextHandleBytes(upTo - out.totalBytes(), budget.peak(requested));
                out.add(driver.create(bytes), bytes);
                accounting.physicalCreated(bytes);
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
        return pageBytes >= config.fragRatio() * requested;
    }

    void poolOrRelease(long handle, long bytes) {
        if (resizer.keepsWhileAliased(handle, bytes)) return;
        if (!pool.push(bytes, handle)) release(handle, bytes);
    }

    /**
     * Releases an unmapped handle. If the driver refuses, the pool keeps the handle (past its limit)
     * so that a later drain or close retries, rather than losing it halfway through a loop.
     */
    private void release(long handle, long bytes) {
        if (resizer.keepsWhileAliased(handle, bytes)) return;
        try {
            driver.release(handle);
            accounting.physicalReleased(bytes);
        } catch (DriverException e) {
            pool.keep(bytes, handle);
        }
    }

    // ---------------------------------------------------------------- reclaiming free pages

    /**
     * Unmaps whole handles of up to {@code wantedBytes} lying inside FREE blocks with no pending
     * work, as {@link ReclaimPlanner} picks them, and adds them to {@code out}. The blocks are
     * taken out under the lock, unmapped without it, and become unmapped space under it again; a
     * block whose unmap fails stays FREE and mapped. Lock not held.
     */
    void reclaimFreeHandles(long wantedBytes, HandleRun out, boolean promoteFirst) {
        int[] pieces;
        int n;
        lock.lock();
        try {
            if (promoteFirst) freeLists.promoteCompleted();
            pieces = new int[freeLists.noPendingWork().size()];
            n = reclaimPlanner.detachReclaimable(wantedBytes, pieces);
            if (n > 0) inFlight.begin();
        } finally {
            lock.unlock();
        }
        if (n == 0) return;
        boolean[] unmappedOk = new boolean[n];
        for (int i = 0; i < n; i++) {
            long from = blocks.address[pieces[i]];
            long to = from + blocks.size[pieces[i]];
            try {
                pages.unmapRange(from, to, out);
                unmappedOk[i] = true;
            } catch (DriverException e) {
                // still mapped: the block goes back as it was
            }
        }
        lock.lock();
        try {
            for (int i = 0; i < n; i++) {
                if (unmappedOk[i]) {
                    restoreUnmapped(pieces[i]);
                } else {
                    blocks.requestedOrStream[pieces[i]] = NO_PENDING_WORK;
                    reattachFree(pieces[i]);
                }
            }
            inFlight.end();
        } finally {
            lock.unlock();
        }
    }

    int coalesceUnmapped(int id) {
        int n = blocks.next[id];
        if (n != NONE && blocks.kind[n] == UNMAPPED) {
            unmapped.remove(n);
            blocks.size[id] += blocks.size[n];
            blocks.unlink(n);
            blocks.recycle(n);
        }
        int p = blocks.prev[id];
        if (p != NONE && blocks.kind[p] == UNMAPPED) {
            unmapped.remove(p);
            blocks.size[p] += blocks.size[id];
            blocks.unlink(id);
            blocks.recycle(id);
            id = p;
        }
        return id;
    }

    // ---------------------------------------------------------------- draining and closing

    /**
     * Releases cached physical memory: first waits for pending frees when {@code waitForStreams}
     * (else promotes those already complete), then unmaps and releases every whole free handle,
     * and drains the pool. Lock not held.
     */
    void releaseCachedMemory(boolean waitForStreams) {
        if (waitForStreams) {
            waitForPendingFrees(-1);
        } else {
            lock.lock();
            try {
                freeLists.promoteCompleted();
            } finally {
                lock.unlock();
            }
        }
        lock.lock();
        try {
            resizer.unmapRetiredAliases();
        } finally {
            lock.unlock();
        }
        HandleRun freed = new HandleRun();
        reclaimFreeHandles(Long.MAX_VALUE, freed, false);
        for (int i = 0; i < freed.count(); i++) release(freed.handle(i), freed.bytes(i));
        pool.drain(driver, accounting);
    }

    /**
     * Unmaps and releases everything, live allocations included, and frees the range. Memory freed
     * device-wide first waits for a device synchronisation (cudaFree's promise); if that fails, it
     * is unmapped anyway.
     */
    void close() {
        lock.lock();
        try {
            if (freeLists.hasDeviceWideFrees()) {
                try {
                    freeLists.synchronizeDeviceWide();
                } catch (RuntimeException ignored) {
                    // Closing anyway, as with a failing unmap below.
                }
            }
            resizer.unmapAllAliases();
            pages.unmapAll(this::release);
            try {
                freeLists.close();
                driver.addressFree(base, span);
            } catch (DriverException ignored) {
                // as above
            }
        } finally {
            lock.unlock();
        }
    }

    /** The region's counters, taken under its lock. */
    RegionStats stats() {
        lock.lock();
        try {
            return new RegionStats(allocations, frees, cacheHits, cacheMisses, freeLists.freeBytes(),
                    freeLists.trackedStreams());
        } finally {
            lock.unlock();
        }
    }

    /** Receives one run of contiguously mapped pages. */
    interface RunVisitor {
        void visit(long va, long size);
    }

    /**
     * Calls {@code visitor} once per run of contiguously mapped pages, under the region's lock, once
     * no placement or reclaim is in flight (so no page is being mapped or unmapped meanwhile). A run
     * mapped after this returns reads the peers in force, so a grant misses none.
     */
    void forEachMappedRun(RunVisitor visitor) {
        lock.lock();
        try {
            inFlight.awaitNone();
            pages.forEachMappedRun(visitor);
        } finally {
            lock.unlock();
        }
    }

    long roundUpToPage(long bytes) {
        return (bytes + pageBytes - 1) & -pageBytes;
    }

    /** No unmapped range of this region is large enough; the manager adds a region. */
    static final class RegionFullException extends RuntimeException {
        RegionFullException() {
            super(null, null, false, false);
        }
    }
}
