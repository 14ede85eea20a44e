package dev.vmmkit.core;

import java.util.List;

/**
 * Where an allocator's reserved address space stands at one moment: every block of every region,
 * in address order. Made by {@link VmmManager#blockMap()} for reports; never on the hot path.
 *
 * @param regions the small-request regions first, then the large ones, each in creation order
 */
public record BlockMap(List<Region> regions) {

    public BlockMap {
        regions = List.copyOf(regions);
    }

    /** What stands behind a block's addresses. */
    public enum Kind {
        /** Handed out to the program. */
        LIVE,
        /** Mapped to physical memory and cached for reuse. */
        FREE_MAPPED,
        /** Reserved address space with no physical memory behind it. */
        UNMAPPED
    }

    /**
     * One reserved range.
     *
     * @param name   "small region" or "large region"
     * @param base   first address
     * @param span   bytes reserved
     * @param blocks the blocks that tile it, in address order
     */
    public record Region(String name, long base, long span, List<Block> blocks) {
        public Region {
            blocks = List.copyOf(blocks);
        }
    }

    /**
     * One block.
     *
     * @param address        first address
     * @param size           bytes the block covers (a live block: its request rounded up to the alignment)
     * @param kind           what is behind it
     * @param requestedBytes bytes the program asked for (live blocks; 0 otherwise)
     */
    public record Block(long address, long size, Kind kind, long requestedBytes) {
    }
}
