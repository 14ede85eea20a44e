package dev.vmmkit.interpose;

import org.agrona.collections.Long2LongHashMap;

/**
 * The program's requests as seen in monitor mode, where the memory comes from the real runtime:
 * live allocations by address, counts and the peak of live bytes.
 */
final class RequestLedger {
    private final Long2LongHashMap sizeByAddress = new Long2LongHashMap(-1);
    private long allocations;
    private long frees;
    private long liveBytes;
    private long peakLiveBytes;

    synchronized void allocated(long address, long size) {
        long previous = sizeByAddress.put(address, size);
        if (previous >= 0) liveBytes -= previous; // a free we never saw (e.g. made before we started)
        allocations++;
        liveBytes += size;
        peakLiveBytes = Math.max(peakLiveBytes, liveBytes);
    }

    /** Forgets {@code address}; returns its size, or -1 for an address not live. */
    synchronized long freed(long address) {
        long size = sizeByAddress.remove(address);
        if (size >= 0) {
            frees++;
            liveBytes -= size;
        }
        return size;
    }

    synchronized long allocations() {
        return allocations;
    }

    synchronized long frees() {
        return frees;
    }

    synchronized long peakLiveBytes() {
        return peakLiveBytes;
    }
}
