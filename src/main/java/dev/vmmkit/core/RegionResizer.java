package dev.vmmkit.core;

import static dev.vmmkit.core.BlockTable.FREE;
import static dev.vmmkit.core.BlockTable.IN_FLIGHT;
import static dev.vmmkit.core.BlockTable.LIVE;
import static dev.vmmkit.core.BlockTable.NONE;
import static dev.vmmkit.core.BlockTable.UNMAPPED;
import static dev.vmmkit.core.StreamWaitList.NO_PENDING_WORK;

/**
 * Resizes live allocations of one {@link RegionHeap} in place, without copying bytes (seed 004,
 * case 3), and keeps address-space headroom behind large ones so that they can grow there. Every
 * method runs under the region's lock, except {@link #resizeInPlace}, which maps new pages without
 * it, as a placement does. Moving one allocation's pages under another's address is
 * {@link RegionRemapper}'s.
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
    private final RegionAliases aliases;

    RegionResizer(RegionHeap region, RegionAliases aliases) {
        this.region = region;
        this.aliases = aliases;
        this.blocks = region.blocks;
        this.pages = region.pages;
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
                if (bytes < blocks.size[id] && !aliases.isAlias(address)) giveBackTail(id, bytes, stream);
                setRequested(id, requested);
                return true;
            }
            if (aliases.isAlias(address)) return false; // borrowed pages: owned pages behind them would complicate its free
            free = blocks.next[id];
            if (free != NONE && !(blocks.kind[free] == FREE && reusableBy(free, stream))) free = NONE;
            if (free != NONE && blocks.end(free) >= end) {
                region.freeLists.remove(free);
                region.trimFreeFront(free, end);
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

    private int liveId(long address) {
        int id = (int) region.liveByAddress.get(address);
        if (id == NONE) {
            throw new InvalidAddressException(address, "not a live allocation (freed, or a pointer vmmkit did not return)");
        }
        return id;
    }
}
