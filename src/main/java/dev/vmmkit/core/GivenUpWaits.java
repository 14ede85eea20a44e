package dev.vmmkit.core;

import java.util.concurrent.atomic.AtomicLong;

/**
 * The timed waits for device-wide frees that gave up (the device still busy after the bound, or a
 * stream capture under way), counted per thread and in all: a recorder reads its own thread's
 * count around a request to tell whether that request gave up ({@link DeviceWideFreeClock#waitsGivenUp}),
 * and the manager's stats report the total. Counting happens only when a wait gives up.
 */
final class GivenUpWaits {
    private final ThreadLocal<long[]> onThread = ThreadLocal.withInitial(() -> new long[1]);
    private final AtomicLong inAll = new AtomicLong();

    /** The calling thread's wait gave up. */
    void count() {
        onThread.get()[0]++;
        inAll.incrementAndGet();
    }

    /** The calling thread's waits that gave up so far. */
    long onThisThread() {
        return onThread.get()[0];
    }

    /** Every thread's. */
    long inAll() {
        return inAll.get();
    }
}
