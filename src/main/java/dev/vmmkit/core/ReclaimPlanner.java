package dev.vmmkit.core;

import java.util.Arrays;

import static dev.vmmkit.core.BlockTable.FREE;
import static dev.vmmkit.core.BlockTable.IN_FLIGHT;
import static dev.vmmkit.core.StreamWaitList.NO_PENDING_WORK;

/**
 * Which free handles of one {@link RegionHeap} move when a placement needs pages over the budget:
 * whole handles inside FREE blocks with no pending work, from the blocks freed longest ago first.
 * A block freed recently is likely to be reused soon by the same step of the next iteration (the
 * same layer of the next batch), so moving its pages away would only move them back; a block left
 * free for long is the program's past. Ties (never-freed space) go to the larger block.
 *
 * <p>Runs under the region's lock; its scratch arrays are reused, so a reclaim allocates only when
 * the number of free blocks grows.
 */
final class ReclaimPlanner {
    /** Block ids fit in the low bits of a sort key; the free sequence above them. */
    private static final int ID_BITS = 26;

    private final BlockTable blocks;
    private final StreamFreeLists freeLists;
    private final PageTable pages;
    private int[] ids = new int[64];
    private long[] order = new long[64];
    private final long[] range = new long[2];

    ReclaimPlanner(BlockTable blocks, StreamFreeLists freeLists, PageTable pages) {
        this.blocks = blocks;
        this.freeLists = freeLists;
        this.pages = pages;
    }

    /**
     * Takes whole handles of up to {@code wantedBytes} from the ends of no-pending-work FREE blocks,
     * coldest first, into IN_FLIGHT blocks of their own, whose ids go to {@code pieces} (as long as
     * the free tree's size). Returns how many.
     */
    int detachReclaimable(long wantedBytes, int[] pieces) {
        if (wantedBytes <= 0) return 0;
        int n = freeBlocksLargestFirst(); // largest first: the order among equal free sequences
        for (int i = 0; i < n; i++) order[i] = (blocks.freeSequence[ids[i]] << ID_BITS) | i;
        Arrays.sort(order, 0, n);
        long remaining = wantedBytes;
        int taken = 0;
        for (int k = 0; k < n && remaining > 0; k++) {
            int id = ids[(int) (order[k] & ((1L << ID_BITS) - 1))];
            pages.wholeHandlesWithin(blocks.address[id], blocks.end(id), range);
            long first = range[0];
            long end = range[1];
            if (end <= first) continue;
            // Whole handles from the end of the block, as many as are still wanted.
            long from = end;
            while (from > first) {
                long start = pages.handleStart(from - 1);
                if (start < first || end - start > remaining) break;
                from = start;
            }
            if (from == end) continue;
            remaining -= end - from;
            pieces[taken++] = detach(id, from, end);
        }
        return taken;
    }

    /**
     * Takes every whole handle larger than {@code minBytes} (the first of each block) out of
     * no-pending-work FREE blocks into IN_FLIGHT blocks of their own, whose ids go to {@code pieces}
     * (as long as the free tree's size), for {@link OversizedFreeHandles}. Returns how many.
     */
    int detachHandlesOver(long minBytes, int[] pieces) {
        int n = freeBlocksLargestFirst();
        int taken = 0;
        for (int i = 0; i < n && blocks.size[ids[i]] > minBytes; i++) {
            int id = ids[i];
            pages.wholeHandlesWithin(blocks.address[id], blocks.end(id), range);
            for (long start = range[0]; start < range[1]; ) {
                long end = pages.handleEnd(start);
                if (end - start > minBytes) {
                    pieces[taken++] = detach(id, start, end);
                    break;
                }
                start = end;
            }
        }
        return taken;
    }

    /** Puts the no-pending-work FREE blocks into {@link #ids}, largest first (growing the scratch arrays); returns how many. */
    private int freeBlocksLargestFirst() {
        SizeTree free = freeLists.noPendingWork();
        int count = free.size();
        if (count == 0) return 0;
        if (ids.length < count) {
            ids = new int[Math.max(count, ids.length * 2)];
            order = new long[ids.length];
        }
        return free.descending(ids);
    }

    /** Cuts [from, to) out of FREE block {@code id} (in the no-pending-work tree) as an IN_FLIGHT block. */
    private int detach(int id, long from, long to) {
        freeLists.remove(id);
        long start = blocks.address[id];
        long end = blocks.end(id);
        int middle;
        if (from > start) {
            blocks.size[id] = from - start;
            freeLists.insert(id);
            middle = blocks.newBlock(IN_FLIGHT, from, to - from);
            blocks.linkAfter(id, middle);
        } else {
            middle = id;
            blocks.kind[id] = IN_FLIGHT;
            blocks.size[id] = to - from;
        }
        if (end > to) {
            int rest = blocks.newBlock(FREE, to, end - to);
            blocks.requestedOrStream[rest] = NO_PENDING_WORK;
            blocks.freeSequence[rest] = blocks.freeSequence[id];
            blocks.linkAfter(middle, rest);
            freeLists.insert(rest);
        }
        return middle;
    }
}
