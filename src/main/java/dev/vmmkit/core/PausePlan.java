package dev.vmmkit.core;

import org.agrona.collections.LongArrayList;

import java.util.Arrays;

/**
 * What one pause of a region releases and copies, read from its page table and live blocks under
 * the region's lock: the runs to unmap and release (a run per handle when the tag keeps its
 * contents, so that each goes as soon as the copies from it have landed), and the live bytes to
 * copy, cut where handles end. Runs a failed resume mapped again ({@code remapped}: pairs of address
 * and bytes) are left out of both: they are released first, and their bytes are in the copy already.
 */
final class PausePlan {
    /** Live blocks closer than this share one copy (the free bytes between them travel too). */
    private static final long MERGE_GAP_BYTES = 1L << 20;

    private final RegionHeap region;
    private final LongArrayList remapped;

    PausePlan(RegionHeap region, LongArrayList remapped) {
        this.region = region;
        this.remapped = remapped;
    }

    /**
     * Adds the mapped run {@code [va, va + size)} to {@code out} as runs to release, leaving out the
     * handles a failed resume mapped again (released first, on their own): each handle a run of its
     * own when {@code eachHandle}, else the stretches between those. Lock held.
     */
    void addRuns(long va, long size, boolean eachHandle, LongArrayList out) {
        long end = va + size;
        long runStart = va;
        for (long at = va; at - end < 0; ) {
            long next = region.pages.handleEnd(at);
            boolean remappedHandle = inAny(remapped, at);
            if (remappedHandle || eachHandle) {
                if (at != runStart) addPair(out, runStart, at);
                if (!remappedHandle) addPair(out, at, next);
                runStart = next;
            }
            at = next;
        }
        if (end != runStart) addPair(out, runStart, end);
    }

    private static void addPair(LongArrayList pairs, long from, long to) {
        pairs.addLong(from);
        pairs.addLong(to - from);
    }

    /** The spans of {@link #liveSpans} cut where a handle ends, so that no copy reads from two handles. Lock held. */
    void keptSpans(LongArrayList out) {
        LongArrayList spans = new LongArrayList();
        liveSpans(spans);
        for (int i = 0; i < spans.size(); i += 2) {
            long end = spans.getLong(i) + spans.getLong(i + 1);
            for (long at = spans.getLong(i); at - end < 0; ) {
                long handleEnd = region.pages.handleEnd(at);
                long next = handleEnd - end < 0 ? handleEnd : end;
                addPair(out, at, next);
                at = next;
            }
        }
    }

    /**
     * The bytes a pause copies: each live block's parts in copyable pages (mapped, and not mapped
     * again by a failed resume: parts in released runs are in the copy already, parts in remapped
     * runs wait for theirs), as (address, bytes) pairs in address order, neighbours closer than
     * {@link #MERGE_GAP_BYTES} merged into one when every page between them is copyable too.
     * Lock held.
     */
    void liveSpans(LongArrayList out) {
        int n = region.liveByAddress.size();
        long[] starts = new long[n];
        long[] sizes = new long[n];
        int[] k = {0};
        region.liveByAddress.forEachLong((address, id) -> {
            starts[k[0]] = address;
            sizes[k[0]++] = region.blocks.size[(int) id];
        });
        Integer[] order = new Integer[n];
        for (int i = 0; i < n; i++) order[i] = i;
        Arrays.sort(order, (a, b) -> Long.compareUnsigned(starts[a], starts[b]));
        long page = region.pageBytes;
        long[] span = {0, 0}; // start and end of the span being built; end 0: none yet
        for (int j = 0; j < n; j++) {
            long end = starts[order[j]] + sizes[order[j]];
            long partStart = -1;
            for (long at = starts[order[j]]; at - end < 0; ) {
                long pageEnd = (at & -page) + page;
                long next = pageEnd - end < 0 ? pageEnd : end;
                if (copyable(at)) {
                    if (partStart == -1) partStart = at;
                } else if (partStart != -1) {
                    addPart(partStart, at, span, out);
                    partStart = -1;
                }
                at = next;
            }
            if (partStart != -1) addPart(partStart, end, span, out);
        }
        if (span[1] != 0) addPair(out, span[0], span[1]);
    }

    /** Adds the part {@code [start, end)} to the span being built, or emits that span and starts a new one. */
    private void addPart(long start, long end, long[] span, LongArrayList out) {
        if (span[1] != 0 && start - span[1] <= MERGE_GAP_BYTES && allCopyable(span[1], start)) {
            span[1] = end;
            return;
        }
        if (span[1] != 0) addPair(out, span[0], span[1]);
        span[0] = start;
        span[1] = end;
    }

    /** The page at {@code va} is mapped and not mapped again by a failed resume. */
    private boolean copyable(long va) {
        return region.pages.isMapped(va) && !inAny(remapped, va);
    }

    private boolean allCopyable(long from, long to) {
        long page = region.pageBytes;
        for (long va = from & -page; va - to < 0; va += page) {
            if (!copyable(va)) return false;
        }
        return true;
    }

    private static boolean inAny(LongArrayList pairs, long va) {
        for (int i = 0; i < pairs.size(); i += 2) {
            if (va - pairs.getLong(i) >= 0 && va - pairs.getLong(i) < pairs.getLong(i + 1)) return true;
        }
        return false;
    }
}
