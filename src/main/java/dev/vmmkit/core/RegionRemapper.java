package dev.vmmkit.core;

import dev.vmmkit.driver.DriverException;

import static dev.vmmkit.core.BlockTable.FREE;
import static dev.vmmkit.core.BlockTable.NONE;
import static dev.vmmkit.core.StreamWaitList.NO_PENDING_WORK;

/**
 * Moves one live allocation's pages under another's address in one {@link RegionHeap}, instead of
 * copying its bytes (seed 000, VmmOptimizer; {@link ManagerResizing} decides when). A remap leaves
 * the source an alias of the destination ({@link RegionAliases}). Every method runs under the
 * region's lock: no other region's lock is taken and no new memory is made but one handle for a
 * destination's part past the copy.
 */
final class RegionRemapper {
    private final RegionHeap region;
    private final BlockTable blocks;
    private final PageTable pages;
    /** The region's aliases: this class makes them, {@link RegionAliases} keeps and retires them. */
    private final RegionAliases aliases;

    RegionRemapper(RegionHeap region, RegionAliases aliases) {
        this.region = region;
        this.aliases = aliases;
        this.blocks = region.blocks;
        this.pages = region.pages;
    }

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
        if (aliases.isAlias(src) || aliases.isAlias(dst)) return false;
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
        region.trimFreeFront(n, end);
        blocks.size[id] = span;
    }
}
