package dev.vmmkit.core;

/**
 * What zero-copy resizing did.
 *
 * @param remaps            copies (interposed device-to-device copies, or moves while growing) done by remapping pages
 * @param bytes             bytes those remaps did not have to copy
 * @param copiesFallenBack  copies between two allocations of this allocator that were considered and left as copies
 *                          (conditions not met, the cost model favoured copying, or earlier work was still running)
 */
public record ZeroCopyStats(long remaps, long bytes, long copiesFallenBack) {
    public static final ZeroCopyStats NONE = new ZeroCopyStats(0, 0, 0);
}
