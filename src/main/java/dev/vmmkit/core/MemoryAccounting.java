package dev.vmmkit.core;

import java.util.concurrent.atomic.AtomicLong;

/**
 * Live and physical byte counts shared by all regions of one manager, with their peaks. Lock-free:
 * regions update it on every allocate and free, each under its own lock.
 */
final class MemoryAccounting {
    private final AtomicLong liveBytes = new AtomicLong();
    private final AtomicLong peakLiveBytes = new AtomicLong();
    private final AtomicLong physicalBytes = new AtomicLong();
    private final AtomicLong peakPhysicalBytes = new AtomicLong();
    private final AtomicLong outOfMemoryRecoveries = new AtomicLong();

    void allocated(long bytes) {
        raisePeak(peakLiveBytes, liveBytes.addAndGet(bytes));
    }

    void freed(long bytes) {
        liveBytes.addAndGet(-bytes);
    }

    void physicalCreated(long bytes) {
        raisePeak(peakPhysicalBytes, physicalBytes.addAndGet(bytes));
    }

    void physicalReleased(long bytes) {
        physicalBytes.addAndGet(-bytes);
    }

    void recoveredFromOutOfMemory() {
        outOfMemoryRecoveries.incrementAndGet();
    }

    long liveBytes() {
        return liveBytes.get();
    }

    long peakLiveBytes() {
        return peakLiveBytes.get();
    }

    long physicalBytes() {
        return physicalBytes.get();
    }

    long peakPhysicalBytes() {
        return peakPhysicalBytes.get();
    }

    long outOfMemoryRecoveries() {
        return outOfMemoryRecoveries.get();
    }

    private static void raisePeak(AtomicLong peak, long value) {
        long p = peak.get();
        while (value > p && !peak.compareAndSet(p, value)) {
            p = peak.get();
        }
    }
}
