package dev.vmmkit.tools.report;

import dev.vmmkit.core.BlockMap;

import java.util.ArrayList;
import java.util.List;

/**
 * A {@link BlockMap} cut into equal cells for drawing: one cell a page (or more, so a region has at
 * most {@value #MAX_CELLS} cells), each with the share of its bytes that is live and free-mapped
 * (the rest is unmapped). A region is drawn up to its last mapped byte; the unmapped space after it
 * is counted, not drawn.
 *
 * @param regions one entry a region, in the block map's order
 */
public record AddressSpaceCells(List<Region> regions) {
    static final int MAX_CELLS = 4096;

    /**
     * @param name          "small region" or "large region"
     * @param spanBytes     address space reserved
     * @param drawnBytes    bytes the cells cover (from the region's start to its last mapped byte)
     * @param cellBytes     bytes a cell covers
     * @param livePercent   per cell, percent of its bytes that are live
     * @param freePercent   per cell, percent of its bytes that are mapped but free
     * @param liveBytes     live bytes in the region (block sizes)
     * @param freeMappedBytes free but mapped bytes in the region
     */
    public record Region(String name, long spanBytes, long drawnBytes, long cellBytes, int[] livePercent,
                         int[] freePercent, long liveBytes, long freeMappedBytes) {
    }

    /** Cuts {@code map} into cells of at least {@code pageBytes}. */
    public static AddressSpaceCells of(BlockMap map, long pageBytes) {
        List<Region> regions = new ArrayList<>();
        for (BlockMap.Region region : map.regions()) regions.add(cells(region, Math.max(1, pageBytes)));
        return new AddressSpaceCells(regions);
    }

    private static Region cells(BlockMap.Region region, long pageBytes) {
        long drawnEnd = region.base();
        long live = 0;
        long free = 0;
        for (BlockMap.Block b : region.blocks()) {
            if (b.kind() == BlockMap.Kind.UNMAPPED) continue;
            drawnEnd = Math.max(drawnEnd, b.address() + b.size());
            if (b.kind() == BlockMap.Kind.LIVE) live += b.size();
            else free += b.size();
        }
        long drawn = drawnEnd - region.base();
        long cellBytes = pageBytes;
        while (drawn / cellBytes > MAX_CELLS) cellBytes *= 2;
        int cells = (int) ((drawn + cellBytes - 1) / cellBytes);
        long[] liveIn = new long[cells];
        long[] freeIn = new long[cells];
        for (BlockMap.Block b : region.blocks()) {
            if (b.kind() == BlockMap.Kind.UNMAPPED) continue;
            long[] into = b.kind() == BlockMap.Kind.LIVE ? liveIn : freeIn;
            long from = b.address() - region.base();
            long to = from + b.size();
            for (long at = from; at < to; ) {
                int cell = (int) (at / cellBytes);
                long cellEnd = (cell + 1) * cellBytes;
                long piece = Math.min(to, cellEnd) - at;
                into[cell] += piece;
                at += piece;
            }
        }
        int[] livePercent = new int[cells];
        int[] freePercent = new int[cells];
        for (int i = 0; i < cells; i++) {
            livePercent[i] = percent(liveIn[i], cellBytes);
            freePercent[i] = Math.min(100 - livePercent[i], percent(freeIn[i], cellBytes));
        }
        return new Region(region.name(), region.span(), drawn, cellBytes, livePercent, freePercent, live, free);
    }

    /** Whole percent of {@code part}; any bytes at all show as at least 1, so no block vanishes. */
    private static int percent(long part, long whole) {
        return part == 0 ? 0 : (int) Math.max(1, Math.round(100.0 * part / whole));
    }
}
