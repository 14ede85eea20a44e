package dev.vmmkit.core;

import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.VmmDriver;
import org.agrona.collections.Long2LongHashMap;

import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;

import static dev.vmmkit.core.BlockTable.FREE;
import static dev.vmmkit.core.BlockTable.LIVE;
import static dev.vmmkit.core.BlockTable.NONE;
import static dev.vmmkit.core.BlockTable.UNMAPPED;

/**
 * One reserved virtual range of one size class, carved into blocks: where each request goes.
 *
 * <p>The invariant that makes the hot path cheap: every byte of a FREE block is mapped. So an
 * allocation that fits a FREE block (best fit in {@link StreamFreeLists}) and a free (coalescing
 * with its address neighbours) are pure bookkeeping, with no driver call (seed 004, case 2).
 *
 * <p>The slow path places a request on UNMAPPED space (extending a FREE block just below it when
 * there is one, seed 004 case 3) and backs the missing pages with handles from the pool, moved
 * out of free blocks, or newly created: {@link SlowPath}, {@link HandleSupply},
 * {@link FreeHandleReclaimer}; {@link PageTable} maps them.
 *
 * <p>The lock guards bookkeeping only. A slow path takes the blocks it will change out of every
 * tree under the lock (they read {@link BlockTable#IN_FLIGHT}, so coalescing leaves them alone),
 * calls the driver without the lock, and takes the lock again to finish or roll back. So frees and
 * cache hits never wait behind create, map, setAccess, unmap, release or a wait for pending frees.
 * No thread ever holds two regions' locks.
 */
final class RegionHeap {
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
    final MemoryAccounting accounting;
    /** False in the zero-copy mode, whose remaps need capped handles (ManagerResizing). */
    private final BooleanSupplier oneHandlePerLoadingRequest;

    final ReentrantLock lock = new ReentrantLock();
    /** Placements and reclaims whose driver calls run off the lock; a peer grant waits for none. */
    final InFlightWork inFlight = new InFlightWork(lock);
    final BlockTable blocks = new BlockTable(1024);
    final SizeTree unmapped = new SizeTree(blocks);
    final StreamFreeLists freeLists;
    final PageTable pages;
    /** The manager's physical budget (every region of a manager reckons the same one). */
    final PhysicalBudget budget;
    /** Where handles come from (pool, free blocks, driver) and go back to. */
    final HandleSupply handles;
    /** Whole handles taken back out of free blocks. */
    final FreeHandleReclaimer reclaimer;
    /** Free handles far above the cap, given back rather than carved by smaller requests. */
    final OversizedFreeHandles oversized;
    /** Requests the cache missed. */
    private final SlowPath slowPath;
    final Long2LongHashMap liveByAddress = new Long2LongHashMap(NONE);
    /** Live allocations that map pages another one owns (made by remapping). */
    final RegionAliases aliases;
    /** Growing and shrinking live allocations in place. */
    final RegionResizer resizer;
    /** Moving one live allocation's pages under another's address. */
    final RegionRemapper remapper;
    /** Read-only views taken under the lock: an allocation's handles for export, every block for reports. */
    final RegionViews views;

    // Counters, read under the lock by stats().
    private long allocations;
    private long frees;
    private long cacheHits;
    private long cacheMisses;
    /** What the region handed out and took back, for loading() and followsAFreeOfItsSize(). */
    private final RequestHistory history = new RequestHistory();

    RegionHeap(String name, long base, long span, long pageBytes, VmmDriver driver, PhysicalPool pool,
               MemoryAccounting accounting, VmmConfig config, OtherRegions others, DeviceWideFence deviceFence,
               PeerAccess access, AliasedHandles aliasedHandles, BooleanSupplier oneHandlePerLoadingRequest) {
        this.name = name;
        this.base = base;
        this.span = span;
        this.pageBytes = pageBytes;
        this.driver = driver;
        this.accounting = accounting;
        this.oneHandlePerLoadingRequest = oneHandlePerLoadingRequest;
        this.freeLists = new StreamFreeLists(blocks, driver.events(), deviceFence);
        this.pages = new PageTable(driver, access, base, span, pageBytes);
        this.budget = new PhysicalBudget(accounting, config, pageBytes);
        this.aliases = new RegionAliases(this, aliasedHandles);
        this.resizer = new RegionResizer(this, aliases);
        this.remapper = new RegionRemapper(this, aliases);
        this.views = new RegionViews(this, name, base, span);
        this.handles = new HandleSupply(this, driver, pool, accounting, budget, config, others);
        this.reclaimer = new FreeHandleReclaimer(this);
        this.oversized = new OversizedFreeHandles(this);
        this.slowPath = new SlowPath(this, name, others, deviceFence);
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
        return slowPath.allocate(bytes, requested, stream);
    }

    /**
     * Allocates {@code bytes} from mapped free memory only: a fit (a cache hit, no driver call), else
     * a fit after promoting completed frees (a miss: events were asked); 0 when nothing fits.
     */
    long allocateCached(long bytes, long requested, long stream) {
        lock.lock();
        try {
            freeLists.promoteCoveredDeviceWide();
            int id = freeLists.bestFit(bytes, stream);
            if (id != NONE && oversized.wouldStrand(id, bytes, requested)) return 0;
            if (id != NONE) {
                cacheHits++;
                return carveLive(id, bytes, requested);
            }
            aliases.unmapRetiredAliases();
            if (freeLists.promoteCompleted()) id = freeLists.bestFit(bytes, stream);
            if (id == NONE || oversized.wouldStrand(id, bytes, requested)) return 0;
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
            history.freed(requested);
            accounting.freed(requested);
            if (aliases.retiresAlias(id, stream)) return requested;
            blocks.kind[id] = FREE;
            blocks.requestedOrStream[id] = stream;
            blocks.freeSequence[id] = freeLists.nextFreeSequence(stream);
            history.blockFreed(blocks.size[id]);
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

    /** True when the live allocation at {@code address} lost its first pages in a failed remap ({@link RemapLostPagesException}). */
    boolean lostPages(long address) {
        lock.lock();
        try {
            return aliases.lostPages(address);
        } finally {
            lock.unlock();
        }
    }

    /** Turns the first {@code bytes} of FREE block {@code id} (in its tree) into a live allocation. Lock held. */
    long carveLive(int id, long bytes, long requested) {
        freeLists.remove(id);
        return takeLive(id, bytes, requested);
    }

    /** As {@link #carveLive}, for a FREE block in no tree. Lock held. */
    long takeLive(int id, long bytes, long requested) {
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
        history.allocated(requested);
        accounting.allocated(requested);
        return blocks.address[id];
    }

    /**
     * True while the region is loading: it has freed at most 1/{@value RequestHistory#LOADING_FREED_SHARE} of the
     * bytes it handed out, as a program does while it loads a model's weights. A large request backed
     * from nothing then gets one handle for the pages it alone fills ({@link HandleSupply}), as native
     * cudaMalloc makes one allocation: such memory mostly lives long, and while it lives its pages
     * could not move anyway. Once memory is recycled, the capped handles keep free pages movable.
     * Lock held.
     */
    boolean loading() {
        return history.loading() && oneHandlePerLoadingRequest.getAsBoolean();
    }

    /**
     * True when a request of {@code bytes} (aligned) comes right after a free of a block of its size
     * (or of its size rounded up to a page) in this region, nothing allocated between: a malloc/free
     * loop's turn, the one pattern the same-size rotation is for ({@link SlowPath}). Lock held.
     */
    boolean followsAFreeOfItsSize(long bytes) {
        return history.followsAFreeOf(bytes, roundUpToPage(bytes));
    }

    /** A cached block that fits, taken under the lock; 0 when none does. */
    long tryCachedFit(long bytes, long requested, long stream) {
        lock.lock();
        try {
            int id = freeLists.bestFit(bytes, stream);
            return id == NONE ? 0 : carveLive(id, bytes, requested);
        } finally {
            lock.unlock();
        }
    }

    // ---------------------------------------------------------------- pending frees and failures

    /** As {@link #waitForPendingFrees(long, long)}, one bound for every kind of free. */
    boolean waitForPendingFrees(long timeoutNanos) {
        return waitForPendingFrees(timeoutNanos, timeoutNanos);
    }

    /**
     * Memory freed but still waiting for earlier device work (a cudaFree's device-wide
     * synchronisation, another stream's event) is often about to become usable. Waits for it
     * without the lock: at most {@code deviceWideTimeoutNanos} in all when cudaFree-style frees are
     * among it, else {@code streamTimeoutNanos} (forever when negative), so a kernel that runs past
     * the bound costs memory, not more time. Returns true if any free became reusable.
     */
    boolean waitForPendingFrees(long streamTimeoutNanos, long deviceWideTimeoutNanos) {
        StreamFreeLists.Waits waits;
        long timeoutNanos;
        lock.lock();
        try {
            timeoutNanos = freeLists.hasDeviceWideFrees() ? deviceWideTimeoutNanos : streamTimeoutNanos;
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

    // ---------------------------------------------------------------- block changes of the slow paths (lock held)

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

    /** Shrinks FREE block {@code id} (in no tree) to start at {@code from}, or drops it when nothing is left. Lock held. */
    void trimFreeFront(int id, long from) {
        long end = blocks.end(id);
        if (end > from) {
            blocks.address[id] = from;
            blocks.size[id] = end - from;
            freeLists.insert(id);
        } else {
            blocks.unlink(id);
            blocks.recycle(id);
        }
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

    /** Merges UNMAPPED block {@code id} (in no tree) with unmapped neighbours; returns the merged block. */
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

    /** Releases cached physical memory (see {@link FreeHandleReclaimer#releaseCachedMemory}). Lock not held. */
    void releaseCachedMemory(boolean waitForStreams) {
        reclaimer.releaseCachedMemory(waitForStreams);
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
            aliases.unmapAllAliases();
            pages.unmapAll(handles::release);
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
