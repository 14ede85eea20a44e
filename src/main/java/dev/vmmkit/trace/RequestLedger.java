package dev.vmmkit.trace;

import org.agrona.collections.Long2LongHashMap;

/**
 * A program's requests as counted from outside the allocator: live allocations by address, counts
 * and the peak of live bytes. Monitor mode keeps one (the memory comes from the real runtime), and
 * so does {@link StatisticsResource}. Thread-safe.
 */
public final class RequestLedger {
    private final Long2LongHashMap sizeByAddress = new Long2LongHashMap(-1);
    private long allocations;
    private long frees;
    private long liveBytes;
    private long peakLiveBytes;

    public synchronized void allocated(long address, long size) {
        long previous = sizeByAddress.put(address, size);
        if (previous >= 0) liveBytes -= previous; // a free we never saw (e.g. made before we started)
        allocations++;
        liveBytes += size;
        peakLiveBytes = Math.max(peakLiveBytes, liveBytes);
    }

    /** Forgets {@code address}; returns its size, or -1 for an address not live. */
    public synchronized long freed(long address) {
        long size = sizeByAddress.remove(address);
        if (size >= 0) {
            frees++;
            liveBytes -= size;
        }
        return size;
    }

    public synchronized long allocations() {
        return allocations;
    }

    public synchronized long frees() {
        return frees;
    }

    public synchronized long peakLiveBytes() {
        return peakLiveBytes;
    }

    /** The size of the live allocation at {@code address}, or -1. */
    public synchronized long sizeOf(long address) {
        return sizeByAddress.get(address);
    }

    public synchronized long liveBytes() {
        return liveBytes;
    }

    /** The addresses of the live allocations, in no particular order. */
    public synchronized long[] liveAddresses() {
        long[] out = new long[sizeByAddress.size()];
        int[] i = {0};
        sizeByAddress.forEach((address, size) -> out[i[0]++] = address);
        return out;
    }
}
