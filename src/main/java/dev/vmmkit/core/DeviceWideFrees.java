package dev.vmmkit.core;

import java.util.concurrent.atomic.AtomicLongArray;

/**
 * One region's cudaFree-style frees as the {@link DeviceWideFence} sees them: the region publishes
 * the sequence number of its newest device-wide free, the fence's thread reads it before each
 * device synchronisation and, once that synchronisation has finished, publishes it back as
 * covered. So a free touches nothing the fence's thread writes, and the fence's thread writes
 * nothing a free or a cache hit reads, except {@link #covered} once per synchronisation (read by
 * the region at each allocation, so that best fit sees the blocks it covers).
 *
 * <p>The two values sit 128 bytes apart (slots of one array), so the region's writes and the fence
 * thread's writes never share a cache line: on a GPU host, where the two threads run on different
 * cores, a shared line moved between them on every free.
 *
 * <p>Thread-safe: {@link #publish} is called by the owning region under its lock, the rest by any
 * thread.
 */
final class DeviceWideFrees {
    private static final int PUBLISHED = 16;
    private static final int COVERED = 32;
    private final AtomicLongArray slots = new AtomicLongArray(48);

    /** The region: frees up to {@code sequence} wait for a synchronisation that starts after now. */
    void publish(long sequence) {
        if (sequence > slots.getPlain(PUBLISHED)) slots.set(PUBLISHED, sequence);
    }

    /** The newest sequence published: a synchronisation started after this read covers the frees up to it. */
    long published() {
        return slots.get(PUBLISHED);
    }

    /** Frees up to the returned sequence have had a device synchronisation start after them and finish. */
    long covered() {
        return slots.get(COVERED);
    }

    /** The fence: a synchronisation that started after {@link #published} returned {@code sequence} has finished. */
    void cover(long sequence) {
        if (sequence > slots.getPlain(COVERED)) slots.set(COVERED, sequence);
    }
}
