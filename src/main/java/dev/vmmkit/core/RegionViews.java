package dev.vmmkit.core;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

import static dev.vmmkit.core.BlockTable.FREE;
import static dev.vmmkit.core.BlockTable.LIVE;
import static dev.vmmkit.core.BlockTable.NONE;

/**
 * Read-only views of one {@link RegionHeap}, each taken under its lock and off the hot path: the
 * handles under one live allocation (for export to another process) and every block (for reports).
 * Placement, freeing and reclaim stay in the region.
 */
final class RegionViews {
    private final RegionHeap region;
    private final String name;
    private final long base;
    private final long span;

    RegionViews(RegionHeap region, String name, long base, long span) {
        this.region = region;
        this.name = name;
        this.base = base;
        this.span = span;
    }

    /** Receives the handles under one live allocation: where the first starts, each handle and its size, the allocation's size. */
    interface PagesVisitor<T> {
        T visit(long firstPage, long[] handles, long[] sizes, long requested);
    }

    /**
     * The handles under the live allocation that starts at {@code address}, for export to another
     * process; null when no live allocation starts there. The visitor runs under the region's lock:
     * the handles of a live allocation do not change meanwhile.
     */
    <T> T withPagesOf(long address, PagesVisitor<T> visitor) {
        region.lock.lock();
        try {
            int id = (int) region.liveByAddress.get(address);
            if (id == NONE) return null;
            BlockTable blocks = region.blocks;
            PageTable pages = region.pages;
            long first = pages.handleStart(address & -region.pageBytes);
            long end = pages.handleEnd((address + blocks.requestedOrStream[id] - 1) & -region.pageBytes);
            HandleRun run = new HandleRun();
            for (long va = first; va < end; va = pages.handleEnd(va)) run.add(pages.handleAt(va), pages.handleEnd(va) - va);
            long[] handles = new long[run.count()];
            long[] sizes = new long[run.count()];
            for (int i = 0; i < run.count(); i++) {
                handles[i] = run.handle(i);
                sizes[i] = run.bytes(i);
            }
            return visitor.visit(first, handles, sizes, blocks.requestedOrStream[id]);
        } finally {
            region.lock.unlock();
        }
    }

    /** The first address of the live block holding {@code address}, or -1; read under the lock, allocates nothing. */
    long liveAllocationHolding(long address) {
        region.lock.lock();
        try {
            if (region.liveByAddress.get(address) != NONE) return address; // the common question: a start
            BlockTable blocks = region.blocks;
            for (int id = 0; id < blocks.kind.length; id++) {
                long start = blocks.address[id];
                if (blocks.kind[id] == LIVE && start <= address && address - start < blocks.size[id]) return start;
            }
            return -1;
        } finally {
            region.lock.unlock();
        }
    }

    /** Every block, in address order, read under the lock (for reports; allocates). */
    BlockMap.Region blockMap() {
        region.lock.lock();
        try {
            BlockTable blocks = region.blocks;
            List<BlockMap.Block> out = new ArrayList<>();
            for (int id = 0; id < blocks.kind.length; id++) {
                byte kind = blocks.kind[id];
                if (kind == 0) continue; // never used, or recycled
                // IN_FLIGHT (a slow path's driver calls in progress, off the lock) shows as unmapped:
                // it holds no live data. A single-threaded replay never sees one between operations.
                out.add(new BlockMap.Block(blocks.address[id], blocks.size[id],
                        kind == LIVE ? BlockMap.Kind.LIVE : kind == FREE ? BlockMap.Kind.FREE_MAPPED : BlockMap.Kind.UNMAPPED,
                        kind == LIVE ? blocks.requestedOrStream[id] : 0));
            }
            out.sort(Comparator.comparingLong(BlockMap.Block::address));
            return new BlockMap.Region(name, base, span, out);
        } finally {
            region.lock.unlock();
        }
    }
}
