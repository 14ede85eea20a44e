package dev.vmmkit.core;

import dev.vmmkit.driver.DriverException;

import static dev.vmmkit.core.BlockTable.FREE;
import static dev.vmmkit.core.BlockTable.IN_FLIGHT;
import static dev.vmmkit.core.BlockTable.LIVE;
import static dev.vmmkit.core.BlockTable.NONE;
import static dev.vmmkit.core.BlockTable.UNMAPPED;
import static dev.vmmkit.core.StreamWaitList.NO_PENDING_WORK;

/**
 * Changes the size or the pages of live allocations of one {@link RegionHeap} without copying
 * bytes: resizing in place (seed 004, case 3) and remapping one allocation's pages under another's
 * address (seed 000, VmmOptimizer). Every method runs under the region's lock, except
 * {@link #resizeInPlace}, which maps new pages without it, as a placement does. A remap leaves
 * the source an alias of the destination ({@link RegionAliases}).
 */
final class RegionResizer {
    /**
     * Live allocations of at least this many pages (128 MiB with 2 MiB pages) get headroom behind
     * them (see {@link #leaveHeadroom}). Spreading smaller ones over the address space cost memory
     * on the BERT trace (one handle per page: ratio 1.020 with this threshold, 1.082 from 16 pages, 1.096 from 4): free
     * blocks far apart are reused less well.
     */
    static final int HEADROOM_FROM_PAGES = 64;

    private final RegionHeap region;
    private final BlockTable blocks;
    private final PageTable pages;
    /** The region's aliases: this class makes them, {@link RegionAliases} keeps and retires them. */
    private final RegionAliases aliases;

    RegionResizer(RegionHeap region, RegionAliases aliases) {
        this.region = region;
        this.aliases = aliases;
        this.blocks = region.blocks;
        this.pages = region.pages;
    }

    private boolean isAlias(long address) {
        return aliases.isAlias(address);
    }

    // ---------------------------------------------------------------- resizing in place

    /**
     * Makes the live allocation at {@code address} {@code bytes} long (already aligned) with
     * {@code requested} as its user size, without moving it: a smaller size gives the tail back as
     * free memory on {@code stream}; a larger one takes the free memory right behind it and maps new
     * handles on the unmapped space after that. Returns false, changing nothing, when the space
     * behind is not free; throws when mapping fails (after undoing it). Takes the lock itself: new
     * handles are found and mapped without it, the blocks involved taken out meanwhile.
     */
    boolean resizeInPlace(long address, long bytes, long requested, long stream) {
        int id;
        int free;
        int u;
        long end = address + bytes;
        long mapFrom;
        long mapTo;
        region.lock.lock();
        try {
            id = liveId(address);
            if (bytes <= blocks.size[id]) {
                if (bytes < blocks.size[id] && !isAlias(address)) giveBackTail(id, bytes, stream);
                setRequested(id, requested);
                return true;
            }
            if (isAlias(address)) return false; // borrowed pages: owned pages behind them would complicate its free
            free = blocks.next[id];
            if (free != NONE && !(blocks.kind[free] == FREE && reusableBy(free, stream))) free = NONE;
            if (free != NONE && blocks.end(free) >= end) {
                region.freeLists.remove(free);
                takeFront(free, end);
                blocks.size[id] = bytes;
                setRequested(id, requested);
                return true;
            }
            u = blocks.next[free != NONE ? free : id];
            mapTo = region.roundUpToPage(end);
            if (u == NONE || blocks.kind[u] != UNMAPPED || blocks.end(u) < mapTo) return false;
            mapFrom = blocks.address[u];
            region.unmapped.remove(u);
            region.splitOffUnmappedTail(u, mapTo);
            blocks.kind[u] = IN_FLIGHT;
            if (free != NONE) {
                region.freeLists.remove(free);
                blocks.kind[free] = IN_FLIGHT;
            }
            // Out of the live table meanwhile: a concurrent free of this address (the program's
            // bug) is refused instead of freeing a block that is changing.
            region.liveByAddress.remove(address);
            region.inFlight.begin(); // a peer grant waits until the new pages are mapped
        } finally {
            region.lock.unlock();
        }

        HandleRun handles = new HandleRun();
        try {
            region.handles.acquire(mapTo - mapFrom, requested, handles);
            pages.mapRun(mapFrom, handles);
        } catch (RuntimeException e) {
            boolean clean = region.handles.giveBackUnmapped(mapFrom, handles);
            region.lock.lock();
            try {
                if (clean) region.restoreUnmapped(u); // else: set aside, as a failed placement's pages are
                if (free != NONE) region.reattachFree(free);
                region.liveByAddress.put(address, id);
                region.inFlight.end();
            } finally {
                region.lock.unlock();
            }
            throw e;
        }

        region.lock.lock();
        try {
            if (free != NONE) {
                blocks.unlink(free);
                blocks.recycle(free);
            }
            blocks.unlink(u);
            blocks.recycle(u);
            blocks.size[id] = bytes;
            setRequested(id, requested);
            if (mapTo > end) {
                // The last new page reaches past the allocation: its tail is free memory.
                int tail = blocks.newBlock(FREE, end, mapTo - end);
                blocks.requestedOrStream[tail] = NO_PENDING_WORK;
                blocks.linkAfter(id, tail);
                region.freeLists.add(tail);
            }
            region.liveByAddress.put(address, id);
            region.inFlight.end();
            return true;
        } finally {
            region.lock.unlock();
        }
    }

    /** Shrinks FREE block {@code id} (in no tree) to start at {@code from}, or drops it when nothing is left. */
    private void takeFront(int id, long from) {
        long end = blocks.end(id);
        if (end > from) {
            blocks.address[id] = from;
            blocks.size[id] = end - from;
            region.freeLists.insert(id);
        } else {
            blocks.unlink(id);
            blocks.recycle(id);
        }
    }

    /** Frees the part of live block {@code id} past {@code bytes}, as a free on {@code stream} would. */
    private void giveBackTail(int id, long bytes, long stream) {
        int tail = blocks.newBlock(FREE, blocks.address[id] + bytes, blocks.size[id] - bytes);
        blocks.requestedOrStream[tail] = stream;
        blocks.freeSequence[tail] = region.freeLists.nextFreeSequence();
        blocks.linkAfter(id, tail);
        blocks.size[id] = bytes;
        region.freeLists.add(tail);
    }

    private boolean reusableBy(int freeBlock, long stream) {
        long tag = blocks.requestedOrStream[freeBlock];
        return tag == NO_PENDING_WORK || tag == stream && StreamFreeLists.reusesOwnFreesAtOnce(stream);
    }

    private void setRequested(int id, long requested) {
        region.accounting.freed(blocks.requestedOrStream[id]);
        blocks.requestedOrStream[id] = requested;
        region.accounting.allocated(requested);
    }

    // ---------------------------------------------------------------- headroom

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

    // ---------------------------------------------------------------- remapping

    /**
     * True when the first {@code count} bytes of live allocation {@code dst} can take over the
     * handles of live allocation {@code src} and {@code costs} says that beats copying: {@code src}
     * is a whole allocation ({@code count} is its user size), {@code dst} is at least as large, both
     * start on a page and own every page the {@code count} bytes touch, those pages are whole
     * handles on both sides, and neither is an alias.
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
        if (!wholeHandles(src, span)) return false;
        long dstEnd = destinationEnd(dst, span);
        if (dstEnd < 0 || dstEnd > Math.max(blocks.end(d), dst + span)) return false; // its last handle is shared
        int srcHandles = pages.handlesIn(src, src + span);
        int dstHandles = pages.handlesIn(dst, dstEnd);
        int newHandles = dstEnd > dst + span ? 1 : 0;
        return costs.remapIsCheaper(dstHandles, (dstEnd - dst) / dstHandles, srcHandles + newHandles,
                span / srcHandles, count);
    }

    /**
     * Where the destination's handles covering its first {@code span} bytes end: at {@code dst +
     * span}, or further when its last handle is larger (handles are sized to the run they fill, so a
     * destination bigger than the source is often one handle). -1 when the range does not start on a
     * handle or is not mapped.
     */
    private long destinationEnd(long dst, long span) {
        long last = dst + span - region.pageBytes;
        if (!pages.isMapped(dst) || !pages.isMapped(last) || pages.handleStart(dst) != dst) return -1;
        return pages.handleEnd(last);
    }

    /** True when {@code [from, from + span)} is mapped and begins and ends on handle boundaries. */
    private boolean wholeHandles(long from, long span) {
        return pages.isMapped(from) && pages.isMapped(from + span - region.pageBytes)
                && pages.handleStart(from) == from && pages.handleEnd(from + span - region.pageBytes) == from + span;
    }

    /**
     * Remaps as {@link #canRemap} allows: the destination's handles covering {@code count} bytes go
     * to the pool, the source's are mapped there, and the source becomes an alias. Returns false
     * with nothing changed when it may not, or when a driver call fails (after putting the
     * destination's own handles back). Lock held: no other region's lock is taken and no new
     * memory is made, only a few calls per handle.
     *
     * @throws RemapLostPagesException when putting the destination's handles back failed too
     */
    boolean remap(long dst, long src, long count, ResizeCostModel costs) {
        if (!canRemap(dst, src, count, costs)) return false;
        long span = region.roundUpToPage(count);
        claimPages((int) region.liveByAddress.get(src), span);
        claimPages((int) region.liveByAddress.get(dst), span);
        long dstEnd = destinationEnd(dst, span);
        HandleRun moved = new HandleRun();
        pages.handlesOf(src, src + span, moved);
        int aliasedCount = moved.count();
        long tail = dstEnd - (dst + span);
        if (tail > 0) {
            // The destination's last handle reaches past the copy: its part past the copy gets a
            // handle of its own (the copy's bytes come from the source; the rest of a buffer made for
            // the copy holds nothing yet).
            try {
                moved.add(region.driver.create(tail, region.handles.exportable()), tail);
                region.accounting.physicalCreated(tail);
            } catch (DriverException e) {
                return false;
            }
        }
        HandleRun own = new HandleRun();
        try {
            pages.unmapRange(dst, dstEnd, own);
        } catch (DriverException e) {
            if (tail > 0) region.handles.poolOrRelease(moved.handle(aliasedCount), tail);
            return false; // nothing was unmapped
        }
        try {
            pages.mapRun(dst, moved);
        } catch (RuntimeException e) {
            // mapRun undid its maps, unless an undoing unmap failed too: a handle left mapped at the
            // destination is counted as an alias's mapping, so that it is not pooled or released
            // (by its owner, or below) before that mapping goes.
            boolean stuck = countMappingsLeft(dst, moved);
            if (tail > 0) region.handles.poolOrRelease(moved.handle(aliasedCount), tail);
            RuntimeException failure = e;
            if (!stuck) {
                try {
                    pages.mapRun(dst, own); // the destination's handles back where they were
                    return false;
                } catch (RuntimeException again) {
                    countMappingsLeft(dst, own);
                    failure = again;
                }
            }
            // Two failures: the destination keeps none of its first pages, and a copy into it would
            // fault, so the caller is told. It can only be freed: as an alias's free does, that
            // unmaps the mappings left there, and its own pages past them become free memory.
            for (int i = 0; i < own.count(); i++) region.handles.poolOrRelease(own.handle(i), own.bytes(i));
            aliases.addWithoutPages(dst);
            throw new RemapLostPagesException(dst, dstEnd - dst, failure);
        }
        aliases.add(src);
        for (int i = 0; i < aliasedCount; i++) aliases.mapped(moved.handle(i));
        for (int i = 0; i < own.count(); i++) region.handles.poolOrRelease(own.handle(i), own.bytes(i));
        return true;
    }

    /**
     * Counts each handle of {@code run} that is still mapped where {@code run} was mapped from
     * {@code from} as an alias's mapping; true when there was one.
     */
    private boolean countMappingsLeft(long from, HandleRun run) {
        boolean left = false;
        long va = from;
        for (int i = 0; i < run.count(); i++) {
            if (pages.isMapped(va) && pages.handleAt(va) == run.handle(i)) {
                aliases.mapped(run.handle(i));
                left = true;
            }
            va += run.bytes(i);
        }
        return left;
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
        region.freeLists.remove(n);
        takeFront(n, end);
        blocks.size[id] = span;
    }

    private int liveId(long address) {
        int id = (int) region.liveByAddress.get(address);
        if (id == NONE) {
            throw new InvalidAddressException(address, "not a live allocation (freed, or a pointer vmmkit did not return)");
        }
        return id;
    }
}
