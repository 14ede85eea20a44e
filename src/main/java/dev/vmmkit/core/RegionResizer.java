package dev.vmmkit.core;

import dev.vmmkit.driver.DriverException;
import org.agrona.collections.IntArrayList;
import org.agrona.collections.LongArrayList;
import org.agrona.collections.LongHashSet;

import static dev.vmmkit.core.BlockTable.FREE;
import static dev.vmmkit.core.BlockTable.LIVE;
import static dev.vmmkit.core.BlockTable.NONE;
import static dev.vmmkit.core.BlockTable.UNMAPPED;
import static dev.vmmkit.core.StreamWaitList.NO_PENDING_WORK;

/**
 * Changes the size or the pages of live allocations of one {@link RegionHeap} without copying
 * bytes: resizing in place (seed 004, case 3) and remapping one allocation's pages under another's
 * address (seed 000, VmmOptimizer). Every method runs under the region's lock.
 *
 * <h2>Aliases</h2>
 * After a remap the destination owns the source's physical pages, and the source's address still
 * maps them too: the source is an <em>alias</em> of the destination's first bytes until it is freed.
 * A stray read through it reads valid memory instead of faulting the device. An alias's pages are
 * never cached as free memory (a later allocation would write into the destination) and never
 * released by it: when the alias is freed, its range waits until the work queued before the free
 * has completed, as any free does, and is then unmapped and becomes plain address space.
 */
final class RegionResizer {
    private final RegionHeap region;
    private final BlockTable blocks;
    /** Addresses of live allocations whose pages another allocation owns. */
    private final LongHashSet aliases = new LongHashSet();
    /** Freed aliases waiting for earlier work before their range is unmapped: block, stream, free sequence. */
    private final IntArrayList retiringIds = new IntArrayList();
    private final LongArrayList retiringStreams = new LongArrayList();
    private final LongArrayList retiringSequences = new LongArrayList();
    /** The manager's record of handles that aliases map. */
    private final AliasedHandles aliasedHandles;

    RegionResizer(RegionHeap region, AliasedHandles aliasedHandles) {
        this.region = region;
        this.aliasedHandles = aliasedHandles;
        this.blocks = region.blocks;
    }

    boolean isAlias(long address) {
        return !aliases.isEmpty() && aliases.contains(address);
    }

    // ---------------------------------------------------------------- resizing in place

    /**
     * Makes the live allocation at {@code address} {@code bytes} long (already aligned) with
     * {@code requested} as its user size, without moving it: a smaller size gives the tail back as
     * free memory on {@code stream}; a larger one takes the free memory right behind it and maps new
     * pages on the unmapped space after that. Returns false, changing nothing, when the space
     * behind is not free; throws when mapping new pages fails (after undoing it).
     */
    boolean resizeInPlace(long address, long bytes, long requested, long stream) {
        int id = liveId(address);
        if (bytes <= blocks.size[id]) {
            if (bytes < blocks.size[id] && !isAlias(address)) giveBackTail(id, bytes, stream);
            setRequested(id, requested);
            return true;
        }
        if (isAlias(address)) return false; // its pages are borrowed: new owned pages behind them would leak on free
        long end = address + bytes;
        int free = blocks.next[id];
        if (free != NONE && !(blocks.kind[free] == FREE && reusableBy(free, stream))) free = NONE;
        if (free != NONE && blocks.end(free) >= end) {
            region.removeFree(free);
            takeFront(free, end);
            blocks.size[id] = bytes;
            setRequested(id, requested);
            return true;
        }
        int u = blocks.next[free != NONE ? free : id];
        long mapTo = region.roundUpToPage(end);
        if (u == NONE || blocks.kind[u] != UNMAPPED || blocks.end(u) < mapTo) return false;
        mapBehind(id, free, u, mapTo, requested);
        blocks.size[id] = bytes;
        setRequested(id, requested);
        if (mapTo > end) {
            // The last new page reaches past the allocation: its tail is free memory.
            int tail = blocks.newBlock(FREE, end, mapTo - end);
            blocks.requestedOrStream[tail] = NO_PENDING_WORK;
            blocks.linkAfter(id, tail);
            region.insertFree(region.coalesceFree(tail));
        }
        return true;
    }

    /**
     * Address-space headroom (seed 004, case 3): a placement of {@code span} bytes on unmapped space
     * does not start right behind a large live allocation, but that allocation's size further on,
     * so the allocation can later double in place. When best-fit block {@code u} has no room for
     * that, the largest unmapped block (the untouched end of the region, usually) is used instead.
     * Address space is plentiful (each region reserves twice the device's memory) and a gap stays
     * unmapped, free for a placement that finds nothing else. Returns the block to place on, in the
     * unmapped tree.
     */
    int leaveHeadroom(int u, long span) {
        long gap = headroomWanted(u);
        if (gap == 0) return u;
        if (blocks.size[u] >= gap + span) return splitOffGap(u, gap);
        int largest = region.unmapped.largest();
        if (largest == NONE || largest == u) return u;
        long largestGap = headroomWanted(largest);
        if (blocks.size[largest] >= largestGap + span) return largestGap == 0 ? largest : splitOffGap(largest, largestGap);
        return u;
    }

    /** The headroom the live allocation just below unmapped block {@code u} should keep, or 0. */
    private long headroomWanted(int u) {
        int below = blocks.prev[u];
        if (below == NONE || blocks.kind[below] != LIVE || blocks.size[below] < HEADROOM_FROM_PAGES * region.pageBytes) {
            return 0;
        }
        return region.roundUpToPage(blocks.size[below]);
    }

    /** Splits the first {@code gap} bytes off unmapped block {@code u}; returns the rest, both in the tree. */
    private int splitOffGap(int u, long gap) {
        int rest = blocks.newBlock(UNMAPPED, blocks.address[u] + gap, blocks.size[u] - gap);
        region.unmapped.remove(u);
        blocks.size[u] = gap;
        blocks.linkAfter(u, rest);
        region.unmapped.insert(u);
        region.unmapped.insert(rest);
        return rest;
    }

    /**
     * Live allocations of at least this many pages (128 MiB with 2 MiB pages) get headroom behind
     * them (see {@link #leaveHeadroom}). Spreading smaller ones over the address space cost memory
     * on the BERT trace (ratio 1.020 with this threshold, 1.082 from 16 pages, 1.096 from 4): free
     * blocks far apart are reused less well.
     */
    static final int HEADROOM_FROM_PAGES = 64;

    /**
     * Maps pages on {@code [address of u, mapTo)} and joins them, with the FREE block {@code free}
     * (or NONE) before them, to live block {@code id}. On failure everything is as before.
     */
    private void mapBehind(int id, int free, int u, long mapTo, long requested) {
        long mapFrom = blocks.address[u];
        int pages = (int) ((mapTo - mapFrom) >>> region.pageShift);
        region.unmapped.remove(u);
        blocks.kind[u] = LIVE; // detached while handles are found: reclaiming must not merge into it
        if (free != NONE) region.detachFree(free);
        long[] handles;
        try {
            handles = region.acquireHandles(pages, requested);
        } catch (RuntimeException e) {
            region.restoreAfterFailure(u, free);
            throw e;
        }
        int mapped = 0;
        try {
            for (; mapped < pages; mapped++) {
                long va = mapFrom + ((long) mapped << region.pageShift);
                region.driver.map(va, region.pageBytes, handles[mapped]);
                region.pageHandle[region.pageIndex(va)] = handles[mapped];
            }
            region.driver.setAccess(mapFrom, mapTo - mapFrom);
        } catch (RuntimeException e) {
            region.rollBackMapping(u, free, mapFrom, handles, mapped, e);
            throw e;
        }
        long uEnd = blocks.end(u);
        if (uEnd > mapTo) {
            int rest = blocks.newBlock(UNMAPPED, mapTo, uEnd - mapTo);
            blocks.linkAfter(u, rest);
            region.unmapped.insert(rest);
        }
        if (free != NONE) {
            blocks.unlink(free);
            blocks.recycle(free);
        }
        blocks.unlink(u);
        blocks.recycle(u);
        blocks.size[id] = mapTo - blocks.address[id];
    }

    /** Shrinks FREE block {@code id} (out of its tree) to start at {@code from}, or drops it when nothing is left. */
    private void takeFront(int id, long from) {
        long end = blocks.end(id);
        if (end > from) {
            blocks.address[id] = from;
            blocks.size[id] = end - from;
            region.insertFree(id);
        } else {
            blocks.unlink(id);
            blocks.recycle(id);
        }
    }

    /** Frees the part of live block {@code id} past {@code bytes}, as a free on {@code stream} would. */
    private void giveBackTail(int id, long bytes, long stream) {
        int tail = blocks.newBlock(FREE, blocks.address[id] + bytes, blocks.size[id] - bytes);
        blocks.requestedOrStream[tail] = stream;
        blocks.freeSequence[tail] = ++region.freeSequence;
        blocks.linkAfter(id, tail);
        blocks.size[id] = bytes;
        region.insertFree(region.coalesceFree(tail));
    }

    private boolean reusableBy(int freeBlock, long stream) {
        long tag = blocks.requestedOrStream[freeBlock];
        return tag == NO_PENDING_WORK || tag == stream && RegionHeap.reusesOwnFreesAtOnce(stream);
    }

    private void setRequested(int id, long requested) {
        region.accounting.freed(blocks.requestedOrStream[id]);
        blocks.requestedOrStream[id] = requested;
        region.accounting.allocated(requested);
    }

    // ---------------------------------------------------------------- remapping

    /**
     * True when the first {@code count} bytes of live allocation {@code dst} can take over the pages
     * of live allocation {@code src} and {@code costs} says that beats copying: {@code src} is a whole
     * allocation ({@code count} is its user size), {@code dst} is at least as large, both start on a
     * page and own every page the {@code count} bytes touch, neither is an alias.
     */
    boolean canRemap(long dst, long src, long count, ResizeCostModel costs) {
        int s = (int) region.liveByAddress.get(src);
        int d = (int) region.liveByAddress.get(dst);
        if (s == NONE || d == NONE || s == d || count <= 0) return false;
        if (blocks.requestedOrStream[s] != count || blocks.requestedOrStream[d] < count) return false;
        long pageMask = region.pageBytes - 1;
        long span = region.roundUpToPage(count);
        if ((src & pageMask) != 0 || (dst & pageMask) != 0) return false;
        if (blocks.size[s] > span || !canOwnPages(s, span) || !canOwnPages(d, span)) return false;
        if (isAlias(src) || isAlias(dst)) return false;
        int pages = (int) (span >>> region.pageShift);
        return costs.remapIsCheaper(pages, region.pageBytes, pages, region.pageBytes, count);
    }

    /**
     * Remaps as {@link #canRemap} allows: the destination's pages covering {@code count} bytes go to
     * the pool, the source's pages are mapped there, and the source becomes an alias. Returns false
     * with nothing changed when it may not, or when a driver call fails (after putting the
     * destination's own pages back).
     */
    boolean remap(long dst, long src, long count, ResizeCostModel costs) {
        if (!canRemap(dst, src, count, costs)) return false;
        long span = region.roundUpToPage(count);
        claimPages((int) region.liveByAddress.get(src), span);
        claimPages((int) region.liveByAddress.get(dst), span);
        int pages = (int) (span >>> region.pageShift);
        long[] own = new long[pages];
        long[] moved = new long[pages];
        for (int i = 0; i < pages; i++) {
            own[i] = region.pageHandle[region.pageIndex(dst) + i];
            moved[i] = region.pageHandle[region.pageIndex(src) + i];
        }
        try {
            region.driver.unmap(dst, span);
        } catch (DriverException e) {
            return false; // nothing was unmapped
        }
        if (mapAll(dst, moved)) {
            aliases.add(src);
            for (int i = 0; i < pages; i++) {
                region.pageHandle[region.pageIndex(dst) + i] = moved[i];
                aliasedHandles.mapped(moved[i]);
                region.poolOrRelease(own[i]);
            }
            return true;
        }
        if (!mapAll(dst, own)) {
            // Two failures in a row: the destination has no pages now. Keep bookkeeping equal to the
            // driver (nothing mapped there) and treat it as an alias, so its free unmaps nothing and
            // never offers the range as mapped memory.
            for (int i = 0; i < pages; i++) {
                region.pageHandle[region.pageIndex(dst) + i] = PhysicalPool.NO_HANDLE;
                region.poolOrRelease(own[i]);
            }
            aliases.add(dst);
        }
        return false;
    }

    /**
     * True when live block {@code id} (starting on a page) owns every page of its first {@code span}
     * bytes, or can take the rest of its last page from the free memory right behind it: no other
     * allocation may ever share a page that is remapped.
     */
    private boolean canOwnPages(int id, long span) {
        long end = blocks.address[id] + span;
        if (blocks.end(id) >= end) return true;
        int n = blocks.next[id];
        return n != NONE && blocks.kind[n] == FREE && blocks.requestedOrStream[n] == NO_PENDING_WORK && blocks.end(n) >= end;
    }

    /** Makes live block {@code id} at least {@code span} long, as {@link #canOwnPages} found possible. */
    private void claimPages(int id, long span) {
        long end = blocks.address[id] + span;
        if (blocks.end(id) >= end) return;
        int n = blocks.next[id];
        region.removeFree(n);
        takeFront(n, end);
        blocks.size[id] = span;
    }

    /** Maps {@code handles} one page each from {@code va} and grants access; on failure unmaps what it mapped. */
    private boolean mapAll(long va, long[] handles) {
        int mapped = 0;
        try {
            for (; mapped < handles.length; mapped++) {
                region.driver.map(va + ((long) mapped << region.pageShift), region.pageBytes, handles[mapped]);
            }
            region.driver.setAccess(va, (long) handles.length << region.pageShift);
            return true;
        } catch (DriverException e) {
            for (int i = 0; i < mapped; i++) {
                try {
                    region.driver.unmap(va + ((long) i << region.pageShift), region.pageBytes);
                } catch (DriverException ignored) {
                    // The driver keeps this page mapped; the next map over it fails and is undone the same way.
                }
            }
            return false;
        }
    }

    // ---------------------------------------------------------------- freeing aliases

    /**
     * Called whenever the region would pool or release {@code handle}: true (and the handle is kept
     * here) while an alias still maps it, so that it is neither mapped for another allocation nor
     * counted as released while it is still in use. It goes once the last alias mapping it does.
     */
    boolean keepsWhileAliased(long handle) {
        return aliasedHandles.keep(handle, region.pageBytes);
    }

    /** The pages of alias block {@code id} are unmapped: their handles may go once no alias maps them. */
    private void dropAliasMappings(int id) {
        long address = blocks.address[id];
        for (long va = address; va < blocks.end(id); va += region.pageBytes) {
            long h = region.pageHandle[region.pageIndex(va)];
            if (h == PhysicalPool.NO_HANDLE) continue;
            if (aliasedHandles.unmapped(h) != 0) region.poolOrRelease(h);
        }
    }

    /**
     * Called by the region's free of live block {@code id}: when it is an alias, keeps its range
     * out of the free lists until the work queued on {@code stream} before the free has completed,
     * then {@link #unmapRetiredAliases} unmaps it. Returns true when it took the block.
     */
    boolean retiresAlias(int id, long stream) {
        if (aliases.isEmpty() || !aliases.remove(blocks.address[id])) return false;
        retiringIds.addInt(id);
        retiringStreams.addLong(stream);
        retiringSequences.addLong(++region.freeSequence);
        return true; // the block stays LIVE-kind meanwhile, so nothing merges into it or lands on it
    }

    /** Unmaps freed aliases whose earlier work has completed (all of them, waiting, when {@code wait}). */
    void unmapRetiredAliases(boolean wait) {
        for (int i = retiringIds.size() - 1; i >= 0; i--) {
            long stream = retiringStreams.getLong(i);
            long sequence = retiringSequences.getLong(i);
            boolean done;
            if (wait) {
                region.waitList.synchronize(stream, region.freeSequence);
                done = true;
            } else {
                done = region.waitList.completedUpTo(stream, region.freeSequence) >= sequence;
            }
            if (done && unmapAlias(retiringIds.getInt(i))) {
                retiringIds.fastUnorderedRemove(i);
                retiringStreams.fastUnorderedRemove(i);
                retiringSequences.fastUnorderedRemove(i);
            }
        }
    }

    /** Unmaps the range of alias block {@code id} (its pages stay with their owner) and makes it address space. */
    private boolean unmapAlias(int id) {
        if (!unmapAliasPages(id, false)) return false;
        blocks.kind[id] = UNMAPPED;
        region.unmapped.insert(region.coalesceUnmapped(id));
        return true;
    }

    /** At close: unmaps every alias, live or freed, so that the close releases each handle once, through its owner. */
    void unmapAllAliases() {
        for (int i = 0; i < retiringIds.size(); i++) unmapAliasPages(retiringIds.getInt(i), true);
        for (LongHashSet.LongIterator it = aliases.iterator(); it.hasNext(); ) {
            int id = (int) region.liveByAddress.get(it.nextValue());
            if (id != NONE) unmapAliasPages(id, true);
        }
        retiringIds.clear();
        retiringStreams.clear();
        retiringSequences.clear();
        aliases.clear();
    }

    /**
     * Unmaps the pages of alias block {@code id} and forgets them; false (nothing changed) when the
     * unmap fails, unless {@code closing}, when they are forgotten anyway.
     */
    private boolean unmapAliasPages(int id, boolean closing) {
        long address = blocks.address[id];
        long size = blocks.size[id];
        if (region.pageHandle[region.pageIndex(address)] != PhysicalPool.NO_HANDLE) {
            try {
                region.driver.unmap(address, size);
            } catch (DriverException e) {
                if (!closing) return false; // still mapped: try again later
            }
        }
        dropAliasMappings(id);
        for (long va = address; va < address + size; va += region.pageBytes) {
            region.pageHandle[region.pageIndex(va)] = PhysicalPool.NO_HANDLE;
        }
        return true;
    }

    private int liveId(long address) {
        int id = (int) region.liveByAddress.get(address);
        if (id == NONE) {
            throw new InvalidAddressException(address, "not a live allocation (freed, or a pointer vmmkit did not return)");
        }
        return id;
    }
}
