package dev.vmmkit.core;

/**
 * Where a small request goes before its region's slow path: the small regions' mapped free blocks
 * first; then, only when mapping a page for it would take physical memory past the budget, a free
 * block of a large region that fits it. Both call no driver function.
 *
 * <p>Why: at the budget the small region's slow path must move a whole free handle out of another
 * region (an unmap, a map and a setAccess, and a page's worth of memory for a request of a few
 * kilobytes), or grow past the budget. The large region's mapped free blocks (the remnants of pages
 * that large tensors share, the holes that a tensor grown by concatenation leaves behind) already
 * hold the bytes: a small request placed there costs nothing, and the page it lands on is usually
 * pinned by a live neighbour already. Below the budget the size classes stay apart, so small
 * long-lived tensors do not pin the large region's pages.
 */
final class SmallRequestOverflow {
    private SmallRequestOverflow() {
    }

    /**
     * An address for a small request of {@code bytes} (aligned; {@code requested} asked) on
     * {@code stream} from mapped free memory, or 0 when none fits: then the small region's slow path
     * places it.
     */
    static long allocateFromMappedMemory(RegionHeap[] small, RegionHeap[] large, long bytes, long requested, long stream) {
        for (int i = small.length - 1; i >= 0; i--) {
            long address = small[i].allocateCached(bytes, requested, stream);
            if (address != 0) return address;
        }
        if (small.length == 0 || !small[small.length - 1].budget.wouldExceed(bytes, requested)) return 0;
        for (int i = large.length - 1; i >= 0; i--) {
            long address = large[i].allocateCached(bytes, requested, stream);
            if (address != 0) return address;
        }
        return 0;
    }
}
