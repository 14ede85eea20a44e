package dev.vmmkit.core;

import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.VmmDriver;
import org.agrona.collections.Long2LongHashMap;
import org.agrona.collections.Long2ObjectHashMap;

import java.util.concurrent.locks.ReentrantLock;

import static dev.vmmkit.core.BlockTable.FREE;
import static dev.vmmkit.core.BlockTable.LIVE;
import static dev.vmmkit.core.BlockTable.NONE;
import static dev.vmmkit.core.BlockTable.UNMAPPED;
import static dev.vmmkit.core.StreamWaitList.NO_PENDING_WORK;

/**
 * One reserved virtual range, carved into blocks: the VA allocator, tracker and mapped cache of
 * one size class. Guarded by its own lock (seed 001, 5.4).
 *
 * <p>The invariant that makes the hot path cheap: every byte of a FREE block is mapped. So an
 * allocation that fits a FREE block (best fit in the size tree) and a free (coalescing with its
 * address neighbours) are pure bookkeeping, with no driver call (seed 004, case 2).
 *
 * <p>The slow path places a request on UNMAPPED space (extending a FREE block just below it when
 * there is one, seed 004 case 3), and backs the missing pages with handles: from the pool, newly
 * created, or moved out of fully free pages of FREE blocks. Physical memory only grows while it
 * stays within {@code reserveSlack} of the peak live bytes; beyond that, free pages move to where
 * they are needed. That is what keeps peak physical memory close to peak live memory.
 */
final class RegionHeap {
    /** The longest an allocation waits for pending frees before it maps more memory instead. */
    static final long PENDING_FREE_WAIT_NANOS = 1_000_000;

    private final String name;
    private final long base;
    private final long span;
    private final long pageBytes;
    private final int pageShift;
    private final VmmDriver driver;
    private final PhysicalPool pool;
    private final MemoryAccounting accounting;
    private final VmmConfig config;
    private final PageDonor donor;

    final ReentrantLock lock = new ReentrantLock();
    private final BlockTable blocks = new BlockTable(1024);
    private final SizeTree unmapped = new SizeTree(blocks);
    private final SizeTree freeWithoutPendingWork = new SizeTree(blocks);
    private final Long2ObjectHashMap<SizeTree> freeByStream = new Long2ObjectHashMap<>();
    private final Long2LongHashMap liveByAddress = new Long2LongHashMap(NONE);
    private final long[] pageHandle;
    private final StreamWaitList waitList;
    private long freeSequence;
    private int[] scratch = new int[64];

    // Hot-path memo: the size tree of the stream used last. Starts at NO_PENDING_WORK, which
    // treeOf answers before consulting the memo, so the memo never matches before it is set.
    private long lastStream = NO_PENDING_WORK;
    private SizeTree lastStreamTree;

    // Counters, read under the lock by stats().
    long allocations;
    long frees;
    long cacheHits;
    long cacheMisses;

    /** Lets a region take free pages from the other regions of its manager. */
    interface PageDonor {
        int donatePages(RegionHeap requester, int wanted, long[] handlesOut, int at);
    }

    RegionHeap(String name, long base, long span, long pageBytes, VmmDriver driver, PhysicalPool pool,
               MemoryAccounting accounting, VmmConfig config, PageDonor donor, DeviceWideFence deviceFence) {
        this.name = name;
        this.base = base;
        this.span = span;
        this.pageBytes = pageBytes;
        this.pageShift = Long.numberOfTrailingZeros(pageBytes);
        this.driver = driver;
        this.pool = pool;
        this.accounting = accounting;
        this.config = config;
        this.donor = donor;
        this.pageHandle = new long[Math.toIntExact(span >>> pageShift)];
        this.waitList = new StreamWaitList(driver.events(), deviceFence);
        int all = blocks.newBlock(UNMAPPED, base, span);
        unmapped.insert(all);
    }

    boolean contains(long address) {
        return address - base >= 0 && address - base < span;
    }

    // ---------------------------------------------------------------- hot path

    /** Allocates {@code bytes} (already aligned) for {@code stream}; returns the address. */
    long allocate(long bytes, long requested, long stream) {
        lock.lock();
        try {
            int id = bestFitFree(bytes, stream);
            if (id != NONE) {
                cacheHits++;
                return carveLive(id, bytes, requested);
            }
            cacheMisses++;
            return allocateSlow(bytes, requested, stream);
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
            blocks.kind[id] = FREE;
            blocks.requestedOrStream[id] = stream;
            blocks.freeSequence[id] = ++freeSequence;
            insertFree(coalesceFree(id));
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

    private int bestFitFree(long bytes, long stream) {
        SizeTree own = reusesOwnFreesAtOnce(stream) ? treeOf(stream, false) : null;
        int a = own == null ? NONE : own.bestFit(bytes);
        int b = freeWithoutPendingWork.bestFit(bytes);
        if (a == NONE) return b;
        if (b == NONE) return a;
        return blocks.size[a] <= blocks.size[b] ? a : b;
    }

    /**
     * Memory freed on a stream is safe for that stream's later work at once. Not so for
     * {@link VmmManager#DEVICE_WIDE_STREAM}: it names no stream whose order would protect the
     * memory, so even an allocation "on" it waits for the device synchronisation.
     */
    private static boolean reusesOwnFreesAtOnce(long stream) {
        return stream != VmmManager.DEVICE_WIDE_STREAM;
    }

    /** Turns the first {@code bytes} of FREE block {@code id} into a live allocation. */
    private long carveLive(int id, long bytes, long requested) {
        removeFree(id);
        long extra = blocks.size[id] - bytes;
        if (extra > 0) {
            int rest = blocks.newBlock(FREE, blocks.address[id] + bytes, extra);
            blocks.requestedOrStream[rest] = blocks.requestedOrStream[id];
            blocks.freeSequence[rest] = blocks.freeSequence[id];
            blocks.linkAfter(id, rest);
            blocks.size[id] = bytes;
            insertFree(rest);
        }
        blocks.kind[id] = LIVE;
        blocks.requestedOrStream[id] = requested;
        liveByAddress.put(blocks.address[id], id);
        allocations++;
        accounting.allocated(requested);
        return blocks.address[id];
    }

    /** Merges FREE block {@code id} (not in a tree) with FREE neighbours of the same tag. */
    private int coalesceFree(int id) {
        long tag = blocks.requestedOrStream[id];
        int n = blocks.next[id];
        if (n != NONE && blocks.kind[n] == FREE && blocks.requestedOrStream[n] == tag) {
            removeFree(n);
            blocks.size[id] += blocks.size[n];
            blocks.freeSequence[id] = Math.max(blocks.freeSequence[id], blocks.freeSequence[n]);
            blocks.unlink(n);
            blocks.recycle(n);
        }
        int p = blocks.prev[id];
        if (p != NONE && blocks.kind[p] == FREE && blocks.requestedOrStream[p] == tag) {
            removeFree(p);
            blocks.size[p] += blocks.size[id];
            blocks.freeSequence[p] = Math.max(blocks.freeSequence[id], blocks.freeSequence[p]);
            blocks.unlink(id);
            blocks.recycle(id);
            id = p;
        }
        return id;
    }

    private void insertFree(int id) {
        treeOf(blocks.requestedOrStream[id], true).insert(id);
    }

    private void removeFree(int id) {
        treeOf(blocks.requestedOrStream[id], false).remove(id);
    }

    private SizeTree treeOf(long tag, boolean create) {
        if (tag == NO_PENDING_WORK) return freeWithoutPendingWork;
        if (tag == lastStream) return lastStreamTree;
        SizeTree t = freeByStream.get(tag);
        if (t == null) {
            if (!create) return null;
            t = new SizeTree(blocks);
            freeByStream.put(tag, t);
        }
        lastStream = tag;
        lastStreamTree = t;
        return t;
    }

    // ---------------------------------------------------------------- slow path

    private long allocateSlow(long bytes, long requested, long stream) {
        if (promoteCompletedFrees()) {
            int id = bestFitFree(bytes, stream);
            if (id != NONE) return carveLive(id, bytes, requested);
        }
        if (physicalWouldExceedBudget(bytes, requested) && awaitPendingFreesBriefly()) {
            int id = bestFitFree(bytes, stream);
            if (id != NONE) return carveLive(id, bytes, requested);
        }
        try {
            return mapAndPlace(bytes, requested, stream);
        } catch (DriverException e) {
            if (!e.isOutOfMemory()) throw e;
            // Seed 001, 5.2: drain what is cached, then retry once, on fresh address space.
            releaseCachedMemory(true);
            donor.donatePages(this, Integer.MAX_VALUE, null, 0);
            try {
                // Waiting for pending frees may have made a free block that fits: use it first.
                int id = bestFitFree(bytes, stream);
                long address = id != NONE ? carveLive(id, bytes, requested) : mapAndPlace(bytes, requested, stream);
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

    /** Physical memory may grow to this before free pages must move: the slack over peak live bytes. */
    private long physicalBudget(long requested) {
        long peakLive = Math.max(accounting.peakLiveBytes(), accounting.liveBytes() + requested);
        return (long) (peakLive * config.reserveSlack()) + pageBytes;
    }

    private boolean physicalWouldExceedBudget(long bytes, long requested) {
        return accounting.physicalBytes() + roundUpToPage(bytes) > physicalBudget(requested);
    }

    /**
     * Memory freed but still waiting for earlier device work (a cudaFree's device-wide
     * synchronisation, another stream's event) is often about to become usable. Before growing
     * past the budget, wait a little for it: at most {@link #PENDING_FREE_WAIT_NANOS} in all, so a
     * long-running kernel costs memory, not time. Returns true if any free became reusable.
     */
    private boolean awaitPendingFreesBriefly() {
        long deadline = System.nanoTime() + PENDING_FREE_WAIT_NANOS;
        boolean any = false;
        for (Long2ObjectHashMap<SizeTree>.KeyIterator it = freeByStream.keySet().iterator(); it.hasNext(); ) {
            long stream = it.nextLong();
            SizeTree tree = freeByStream.get(stream);
            if (tree.isEmpty()) continue;
            long left = deadline - System.nanoTime();
            if (left <= 0) break;
            if (waitList.awaitBriefly(stream, freeSequence, left)) any |= promote(tree, freeSequence);
        }
        return any;
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
     * Places {@code bytes} on unmapped space and maps the pages it needs. If mapping fails, every
     * page mapped here is unmapped again and its handle pooled, so bookkeeping and driver state stay
     * equal; the address range goes back to the unmapped tree (dirty VA discard, seed 001 5.3).
     */
    private long mapAndPlace(long bytes, long requested, long stream) {
        int u = unmapped.bestFit(roundUpToPage(bytes));
        if (u == NONE) throw new RegionFullException();
        int below = blocks.prev[u];
        boolean extend = below != NONE && blocks.kind[below] == FREE
                && (blocks.requestedOrStream[below] == NO_PENDING_WORK
                    || blocks.requestedOrStream[below] == stream && reusesOwnFreesAtOnce(stream));
        long start = extend ? blocks.address[below] : blocks.address[u];
        long mapFrom = blocks.address[u];
        long mapTo = roundUpToPage(start + bytes);
        int pages = (int) ((mapTo - mapFrom) >>> pageShift);

        // Detach both blocks so that reclaiming pages, or promoting completed frees, below cannot
        // merge into them.
        unmapped.remove(u);
        blocks.kind[u] = LIVE;
        if (extend) detachFree(below);
        long[] handles;
        try {
            handles = acquireHandles(pages, requested);
        } catch (RuntimeException e) {
            restoreAfterFailure(u, extend ? below : NONE);
            throw e;
        }
        int mapped = 0;
        try {
            for (; mapped < pages; mapped++) {
                long va = mapFrom + ((long) mapped << pageShift);
                driver.map(va, pageBytes, handles[mapped]);
                pageHandle[pageIndex(va)] = handles[mapped];
            }
            // One setAccess over the whole run, one call instead of one per page (the driver still
            // charges per handle). Not mapWithAccess: if granting access fails, the rollback below
            // unmaps every page and must know when an unmap fails (that page is then still mapped).
            if (pages > 0) driver.setAccess(mapFrom, mapTo - mapFrom);
        } catch (RuntimeException e) {
            rollBackMapping(u, extend ? below : NONE, mapFrom, handles, mapped, e);
            throw e;
        }

        // [mapFrom, mapTo) is mapped now: split it off the unmapped block.
        blocks.kind[u] = FREE;
        long uEnd = blocks.end(u);
        if (uEnd > mapTo) {
            int rest = blocks.newBlock(UNMAPPED, mapTo, uEnd - mapTo);
            blocks.linkAfter(u, rest);
            unmapped.insert(rest);
        }
        blocks.size[u] = mapTo - mapFrom;
        int id = u;
        if (extend) {
            blocks.size[below] += blocks.size[u];
            blocks.unlink(u);
            blocks.recycle(u);
            id = below;
        }
        blocks.kind[id] = FREE;
        blocks.requestedOrStream[id] = NO_PENDING_WORK;
        treeOf(NO_PENDING_WORK, true).insert(id);
        return carveLive(id, bytes, requested);
    }

    /**
     * Undoes the first {@code mapped} page mappings of a failed placement and pools all handles. If
     * an unmap fails too, that page stays mapped and recorded, and the placement's pages are set
     * aside for good (dirty VA discard) rather than offered again while the driver still maps part
     * of them.
     */
    private void rollBackMapping(int u, int below, long mapFrom, long[] handles, int mapped, RuntimeException cause) {
        boolean clean = true;
        for (int i = 0; i < handles.length; i++) {
            long va = mapFrom + ((long) i << pageShift);
            if (i < mapped) {
                try {
                    driver.unmap(va, pageBytes);
                    pageHandle[pageIndex(va)] = PhysicalPool.NO_HANDLE;
                } catch (DriverException stuck) {
                    cause.addSuppressed(stuck);
                    clean = false;
                    continue;
                }
            }
            poolOrRelease(handles[i]);
        }
        if (clean) {
            restoreAfterFailure(u, below);
            return;
        }
        // Set aside only the pages of this placement; the unmapped space after them stays usable.
        long mapTo = mapFrom + ((long) handles.length << pageShift);
        long uEnd = blocks.end(u);
        if (uEnd > mapTo) {
            int rest = blocks.newBlock(UNMAPPED, mapTo, uEnd - mapTo);
            blocks.linkAfter(u, rest);
            blocks.size[u] = mapTo - mapFrom;
            unmapped.insert(rest);
        }
        if (below != NONE) reattachFree(below);
    }

    /**
     * Takes FREE block {@code id} out of its tree for a placement in progress. It reads as LIVE
     * meanwhile, so that coalescing a neighbour (a free promoted on the way) leaves it alone.
     */
    private void detachFree(int id) {
        removeFree(id);
        blocks.kind[id] = LIVE;
    }

    /** Gives back a block {@link #detachFree} took, merging it with neighbours freed meanwhile. */
    private void reattachFree(int id) {
        blocks.kind[id] = FREE;
        insertFree(coalesceFree(id));
    }

    private void restoreAfterFailure(int u, int below) {
        blocks.kind[u] = UNMAPPED;
        unmapped.insert(u);
        if (below != NONE) reattachFree(below);
    }

    /**
     * Gets {@code pages} unmapped handles: pooled ones first, then new ones while physical memory
     * stays within the slack of peak live bytes, then pages moved out of free blocks, then new ones.
     */
    private long[] acquireHandles(int pages, long requested) {
        long[] out = new long[pages];
        int got = 0;
        try {
            while (got < pages) {
                long h = pool.popExact(pageBytes);
                if (h == PhysicalPool.NO_HANDLE) break;
                out[got++] = h;
            }
            if (got < pages) {
                long room = Math.max(0, physicalBudget(requested) - accounting.physicalBytes()) >>> pageShift;
                int mustMove = (int) Math.max(0, (pages - got) - room);
                if (mustMove > 0 && movingPagesIsWorthIt(requested)) {
                    promoteCompletedFrees();
                    got = reclaimFreePages(mustMove, out, got);
                    if (got < pages - room) got = donor.donatePages(this, (int) (pages - room - got), out, got);
                }
            }
            while (got < pages) {
                out[got] = driver.create(pageBytes);
                accounting.physicalCreated(pageBytes);
                got++;
            }
            return out;
        } catch (RuntimeException e) {
            for (int i = 0; i < got; i++) poolOrRelease(out[i]);
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

    private void poolOrRelease(long handle) {
        if (!pool.push(pageBytes, handle)) {
            release(handle);
        }
    }

    /**
     * Releases an unmapped handle. If the driver refuses, the pool keeps the handle (past its limit)
     * so that a later drain or close retries, rather than losing it halfway through a loop.
     */
    private void release(long handle) {
        try {
            driver.release(handle);
            accounting.physicalReleased(pageBytes);
        } catch (DriverException e) {
            pool.keep(pageBytes, handle);
        }
    }

    /**
     * Unmaps up to {@code wanted} whole pages lying inside FREE blocks with no pending work, largest
     * blocks first, and puts their handles into {@code out} from {@code at} (or releases them when
     * {@code out} is null). Returns the new fill of {@code out}. Caller holds the lock.
     */
    int reclaimFreePages(int wanted, long[] out, int at) {
        int remaining = wanted;
        int count = freeWithoutPendingWork.size();
        if (count == 0 || remaining <= 0) return at;
        if (scratch.length < count) scratch = new int[Math.max(count, scratch.length * 2)];
        int n = freeWithoutPendingWork.descending(scratch);
        for (int i = 0; i < n && remaining > 0; i++) {
            int id = scratch[i];
            long first = roundUpToPage(blocks.address[id]);
            long end = blocks.end(id) & -pageBytes;
            if (end - first < pageBytes) continue;
            long take = Math.min((end - first) >>> pageShift, remaining);
            long from = end - (take << pageShift);
            try {
                driver.unmap(from, end - from);
            } catch (DriverException e) {
                continue; // still mapped: leave the block as it is
            }
            for (long va = from; va < end; va += pageBytes) {
                long h = pageHandle[pageIndex(va)];
                pageHandle[pageIndex(va)] = PhysicalPool.NO_HANDLE;
                if (out != null) {
                    out[at++] = h;
                } else {
                    release(h);
                }
            }
            remaining -= (int) take;
            convertToUnmapped(id, from, end);
        }
        return at;
    }

    /** Makes [from, to) of FREE block {@code id} (in the no-pending-work tree) unmapped space. */
    private void convertToUnmapped(int id, long from, long to) {
        freeWithoutPendingWork.remove(id);
        long start = blocks.address[id];
        long end = blocks.end(id);
        int middle;
        if (from > start) {
            blocks.size[id] = from - start;
            freeWithoutPendingWork.insert(id);
            middle = blocks.newBlock(UNMAPPED, from, to - from);
            blocks.linkAfter(id, middle);
        } else {
            middle = id;
            blocks.kind[id] = UNMAPPED;
            blocks.size[id] = to - from;
        }
        if (end > to) {
            int rest = blocks.newBlock(FREE, to, end - to);
            blocks.requestedOrStream[rest] = NO_PENDING_WORK;
            blocks.linkAfter(middle, rest);
            freeWithoutPendingWork.insert(rest);
        }
        unmapped.insert(coalesceUnmapped(middle));
    }

    private int coalesceUnmapped(int id) {
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

    /**
     * The waiting list: FREE blocks of streams whose work before the free has completed lose their
     * stream tag, so any stream may reuse them and their pages may be unmapped. Returns true if any
     * block was promoted.
     */
    private boolean promoteCompletedFrees() {
        boolean promoted = false;
        for (Long2ObjectHashMap<SizeTree>.KeyIterator it = freeByStream.keySet().iterator(); it.hasNext(); ) {
            long stream = it.nextLong();
            SizeTree tree = freeByStream.get(stream);
            if (tree.isEmpty()) continue;
            long done = waitList.completedUpTo(stream, freeSequence);
            if (done < 0) continue;
            promoted |= promote(tree, done);
        }
        return promoted;
    }

    private boolean promote(SizeTree tree, long completedSequence) {
        int count = tree.size();
        if (scratch.length < count) scratch = new int[Math.max(count, scratch.length * 2)];
        int n = tree.descending(scratch);
        int[] ids = java.util.Arrays.copyOf(scratch, n);
        boolean any = false;
        for (int id : ids) {
            if (blocks.kind[id] != FREE || blocks.freeSequence[id] > completedSequence) continue;
            tree.remove(id);
            blocks.requestedOrStream[id] = NO_PENDING_WORK;
            insertFree(coalesceFree(id));
            any = true;
        }
        return any;
    }

    /**
     * Releases cached physical memory: waits for pending frees when {@code waitForStreams}, then
     * unmaps and releases every whole free page, and drains the pool. Returns nothing: accounting
     * tracks the bytes.
     */
    void releaseCachedMemory(boolean waitForStreams) {
        if (waitForStreams) {
            for (Long2ObjectHashMap<SizeTree>.KeyIterator it = freeByStream.keySet().iterator(); it.hasNext(); ) {
                long stream = it.nextLong();
                SizeTree tree = freeByStream.get(stream);
                if (tree.isEmpty()) continue;
                waitList.synchronize(stream, freeSequence);
                promote(tree, freeSequence);
            }
        } else {
            promoteCompletedFrees();
        }
        reclaimFreePages(Integer.MAX_VALUE, null, 0);
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
            SizeTree deviceWide = freeByStream.get(VmmManager.DEVICE_WIDE_STREAM);
            if (deviceWide != null && !deviceWide.isEmpty()) {
                try {
                    waitList.synchronize(VmmManager.DEVICE_WIDE_STREAM, freeSequence);
                } catch (RuntimeException ignored) {
                    // Closing anyway, as with a failing unmap below.
                }
            }
            for (int i = 0; i < pageHandle.length; i++) {
                long h = pageHandle[i];
                if (h == PhysicalPool.NO_HANDLE) continue;
                long va = base + ((long) i << pageShift);
                try {
                    driver.unmap(va, pageBytes);
                    release(h);
                } catch (DriverException ignored) {
                    // Closing anyway; the driver reclaims what is left when the process ends.
                }
                pageHandle[i] = PhysicalPool.NO_HANDLE;
            }
            try {
                waitList.close();
                driver.addressFree(base, span);
            } catch (DriverException ignored) {
                // as above
            }
        } finally {
            lock.unlock();
        }
    }

    long mappedFreeBytes() {
        lock.lock();
        try {
            long sum = 0;
            int[] ids = new int[Math.max(1, freeWithoutPendingWork.size())];
            int n = freeWithoutPendingWork.descending(ids);
            for (int i = 0; i < n; i++) sum += blocks.size[ids[i]];
            for (SizeTree t : freeByStream.values()) {
                int[] more = new int[Math.max(1, t.size())];
                int m = t.descending(more);
                for (int i = 0; i < m; i++) sum += blocks.size[more[i]];
            }
            return sum;
        } finally {
            lock.unlock();
        }
    }

    /** Every block, in address order, read under the lock (for reports; allocates). */
    BlockMap.Region blockMap() {
        lock.lock();
        try {
            java.util.List<BlockMap.Block> out = new java.util.ArrayList<>();
            for (int id = 0; id < blocks.capacity(); id++) {
                byte kind = blocks.kind[id];
                if (kind == 0) continue; // never used, or recycled
                out.add(new BlockMap.Block(blocks.address[id], blocks.size[id],
                        kind == LIVE ? BlockMap.Kind.LIVE : kind == FREE ? BlockMap.Kind.FREE_MAPPED : BlockMap.Kind.UNMAPPED,
                        kind == LIVE ? blocks.requestedOrStream[id] : 0));
            }
            out.sort(java.util.Comparator.comparingLong(BlockMap.Block::address));
            return new BlockMap.Region(name, base, span, out);
        } finally {
            lock.unlock();
        }
    }

    private long roundUpToPage(long bytes) {
        return (bytes + pageBytes - 1) & -pageBytes;
    }

    private int pageIndex(long va) {
        return (int) ((va - base) >>> pageShift);
    }

    /** No unmapped range of this region is large enough; the manager adds a region. */
    static final class RegionFullException extends RuntimeException {
        RegionFullException() {
            super(null, null, false, false);
        }
    }
}
