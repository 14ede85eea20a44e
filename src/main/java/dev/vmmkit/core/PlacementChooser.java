package dev.vmmkit.core;

import static dev.vmmkit.core.BlockTable.FREE;
import static dev.vmmkit.core.BlockTable.IN_FLIGHT;
import static dev.vmmkit.core.BlockTable.NONE;
import static dev.vmmkit.core.BlockTable.UNMAPPED;
import static dev.vmmkit.core.StreamWaitList.NO_PENDING_WORK;

/**
 * Where a slow-path placement of one {@link RegionHeap} goes, and taking that span out of every
 * tree while its pages are mapped without the lock. A placement covers part of one unmapped block
 * and may start in the free block just below it and end in the free block just above it; only the
 * unmapped part needs pages.
 *
 * <p>Within the budget, new pages are cheap (create, map, setAccess) and shape the layout: the
 * best-fitting unmapped block is used, extending the free block below it (seed 004's "grow" case),
 * and pages may be mapped ahead of the request for later ones.
 * Over the budget, every page to fill is a handle moved out of a free block elsewhere (unmap, map,
 * setAccess, about 30 us per handle), so the span that needs the fewest unbacked pages wins, free
 * memory on both sides counted; ties go to the smallest stretch, so large holes stay whole.
 *
 * <p>All methods run under the region's lock.
 */
final class PlacementChooser {
    /** A span taken for a placement: IN_FLIGHT blocks in no tree, adjacent in address order. */
    static final class Placement {
        /** The free block below, all part of the placement (IN_FLIGHT), or NONE. */
        int below = NONE;
        /** The unmapped pages to map, {@code [mapFrom, mapTo)} (IN_FLIGHT). */
        int unmapped = NONE;
        /** The head of the free block above, part of the placement (IN_FLIGHT), or NONE. */
        int above = NONE;
        long mapFrom;
        long mapTo;
        /** The end of the pages the request itself needs; up to {@code mapTo}, pages are mapped ahead. */
        long neededTo;
        /** The end of the pages to map that the request fills whole (its last page may be shared). */
        long wholeTo;
    }

    private final RegionHeap region;
    private final BlockTable blocks;
    private int[] scratch = new int[64];

    // The best candidate of the search in progress.
    private int bestU;
    private long bestStart;
    private long bestCost;
    private long bestStretch;

    PlacementChooser(RegionHeap region) {
        this.region = region;
        this.blocks = region.blocks;
    }

    /**
     * Chooses the span for {@code bytes} (aligned) on {@code stream} and takes it out of every tree;
     * {@code fewestPages} when pages must be moved to fill it. Otherwise, when the placement ends on
     * unmapped space, it maps {@code mapAtLeast} bytes there (as far as the unmapped block goes):
     * the pages past the request are mapped ahead. Throws {@link RegionHeap.RegionFullException}
     * when no unmapped block can hold it.
     */
    Placement take(long bytes, long stream, boolean fewestPages, long mapAtLeast) {
        long span = region.roundUpToPage(bytes);
        bestU = NONE;
        if (fewestPages) {
            chooseFewestPages(bytes, stream);
        } else {
            int u = region.unmapped.bestFit(span);
            if (u != NONE) {
                int below = reusableFree(blocks.prev[u], stream, bytes);
                bestU = u;
                bestStart = below != NONE ? blocks.address[below] : blocks.address[u];
            }
        }
        if (bestU == NONE) throw new RegionHeap.RegionFullException();
        int u = bestU;
        long start = bestStart;
        if (start == blocks.address[u] && start + bytes <= blocks.end(u)) {
            // On unmapped space alone: a large live allocation below keeps room to grow in place.
            u = region.resizer.leaveHeadroom(u, span);
            start = blocks.address[u];
        }
        Placement p = detach(u, start, bytes);
        if (!fewestPages && p.above == NONE && p.mapTo - p.mapFrom < mapAtLeast) growMapping(p, mapAtLeast);
        return p;
    }

    /**
     * Maps {@code mapAtLeast} bytes (rounded down to a page) from the start of the placement's
     * unmapped pages, as far as unmapped space goes: the pages past the request are mapped ahead,
     * for later requests to find without a driver call.
     */
    private void growMapping(Placement p, long mapAtLeast) {
        int u = p.unmapped;
        int rest = blocks.next[u];
        if (rest == NONE || blocks.kind[rest] != UNMAPPED) return;
        long to = Math.min(blocks.end(rest), p.mapFrom + (mapAtLeast & -region.pageBytes));
        region.unmapped.remove(rest);
        region.splitOffUnmappedTail(rest, to);
        blocks.size[u] += blocks.size[rest];
        blocks.unlink(rest);
        blocks.recycle(rest);
        p.mapTo = to;
    }

    /** Over every unmapped block, the placement that leaves the fewest pages to fill. */
    private void chooseFewestPages(long bytes, long stream) {
        SizeTree tree = region.unmapped;
        if (scratch.length < tree.size()) scratch = new int[Math.max(tree.size(), scratch.length * 2)];
        int n = tree.descending(scratch);
        for (int i = 0; i < n; i++) {
            int u = scratch[i];
            int below = reusableFree(blocks.prev[u], stream, bytes);
            int above = reusableFree(blocks.next[u], stream, bytes);
            long low = below != NONE ? blocks.address[below] : blocks.address[u];
            long high = above != NONE ? blocks.end(above) : blocks.end(u);
            if (high - low < bytes) continue;
            long stretch = high - low;
            consider(u, low, bytes, low, high, stretch); // from the bottom of the stretch
            // Or up to its top, when that starts on the unmapped block (else it maps all of the
            // unmapped block, as from the bottom, which wins the tie).
            long top = (high - bytes) & -region.pageBytes;
            if (top >= blocks.address[u]) consider(u, top, bytes, low, high, stretch);
        }
    }

    /** Considers the placement of {@code bytes} at {@code start} within {@code [low, high)} around unmapped {@code u}. */
    private void consider(int u, long start, long bytes, long low, long high, long stretch) {
        if (start < low || start + bytes > high) return;
        long uStart = blocks.address[u];
        if (start >= uStart && (start & (region.pageBytes - 1)) != 0) return; // unmapped space starts on a page
        long mapFrom = Math.max(uStart, start & -region.pageBytes);
        long mapTo = Math.min(blocks.end(u), region.roundUpToPage(start + bytes));
        if (mapTo <= mapFrom) return; // lies wholly in free memory: a cache hit would have found it
        long cost = mapTo - mapFrom;
        if (bestU == NONE || cost < bestCost || cost == bestCost && stretch < bestStretch) {
            bestU = u;
            bestStart = start;
            bestCost = cost;
            bestStretch = stretch;
        }
    }

    /**
     * Block {@code id} when it is a FREE block that {@code stream} may use now and that does not
     * hold {@code bytes} alone (such a block is a cache hit, not a placement), else NONE.
     */
    private int reusableFree(int id, long stream, long bytes) {
        if (id == NONE || blocks.kind[id] != FREE || blocks.size[id] >= bytes) return NONE;
        long tag = blocks.requestedOrStream[id];
        boolean reusable = tag == NO_PENDING_WORK || tag == stream && StreamFreeLists.reusesOwnFreesAtOnce(stream);
        return reusable ? id : NONE;
    }

    /** Takes {@code [start, start + bytes)} around unmapped block {@code u} (in the tree) out of every tree. */
    private Placement detach(int u, long start, long bytes) {
        Placement p = new Placement();
        long end = start + bytes;
        long uStart = blocks.address[u];
        p.mapFrom = Math.max(uStart, start & -region.pageBytes);
        p.mapTo = Math.min(blocks.end(u), region.roundUpToPage(end));
        p.neededTo = p.mapTo;
        p.wholeTo = Math.max(p.mapFrom, Math.min(p.mapTo, end & -region.pageBytes));
        region.unmapped.remove(u);
        region.splitOffUnmappedTail(u, p.mapTo);
        if (p.mapFrom > uStart) {
            // The head stays unmapped space; the pages to map become a block of their own.
            int mapped = blocks.newBlock(UNMAPPED, p.mapFrom, blocks.end(u) - p.mapFrom);
            blocks.size[u] = p.mapFrom - uStart;
            blocks.linkAfter(u, mapped);
            region.unmapped.insert(u);
            u = mapped;
        }
        blocks.kind[u] = IN_FLIGHT;
        p.unmapped = u;
        if (start < p.mapFrom) p.below = detachWholeFree(blocks.prev[u]);
        if (end > p.mapTo) p.above = detachFreeUpTo(blocks.next[u], end);
        return p;
    }

    /** Takes FREE block {@code id} out of its tree as an IN_FLIGHT block. */
    private int detachWholeFree(int id) {
        region.freeLists.remove(id);
        blocks.kind[id] = IN_FLIGHT;
        return id;
    }

    /** Cuts {@code [start, to)} off the start of FREE block {@code id} (in its tree) as an IN_FLIGHT block. */
    private int detachFreeUpTo(int id, long to) {
        region.freeLists.remove(id);
        if (to < blocks.end(id)) region.freeLists.insert(splitFree(id, to));
        blocks.kind[id] = IN_FLIGHT;
        return id;
    }

    /** Splits FREE block {@code id} at {@code at}; returns the new upper part, with the same tag, in no tree. */
    private int splitFree(int id, long at) {
        int upper = blocks.newBlock(FREE, at, blocks.end(id) - at);
        blocks.requestedOrStream[upper] = blocks.requestedOrStream[id];
        blocks.freeSequence[upper] = blocks.freeSequence[id];
        blocks.size[id] = at - blocks.address[id];
        blocks.linkAfter(id, upper);
        return upper;
    }

    /** After the pages are mapped: the placement as one FREE block with no pending work, in no tree. */
    int join(Placement p) {
        int id = p.unmapped;
        if (p.below != NONE) {
            blocks.size[p.below] += blocks.size[id];
            blocks.unlink(id);
            blocks.recycle(id);
            id = p.below;
        }
        if (p.above != NONE) {
            blocks.size[id] += blocks.size[p.above];
            blocks.unlink(p.above);
            blocks.recycle(p.above);
        }
        blocks.kind[id] = FREE;
        blocks.requestedOrStream[id] = NO_PENDING_WORK;
        blocks.freeSequence[id] = region.freeLists.nextFreeSequence(); // just mapped: the last to move
        return id;
    }

    /**
     * After a failed mapping: the free parts go back to their trees, merged with what they were cut
     * from; the unmapped part too when {@code clean}, else it stays IN_FLIGHT for good (set aside).
     */
    void giveBack(Placement p, boolean clean) {
        if (clean) region.restoreUnmapped(p.unmapped);
        if (p.below != NONE) region.reattachFree(p.below);
        if (p.above != NONE) region.reattachFree(p.above);
    }
}
