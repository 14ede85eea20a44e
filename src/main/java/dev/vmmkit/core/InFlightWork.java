package dev.vmmkit.core;

import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A region's placements, resizes and reclaims in flight: blocks taken out under the region's lock
 * whose pages are being mapped or unmapped without it. A peer grant waits until there are none
 * ({@link RegionHeap#forEachMappedRun}). Every method is called with the region's lock held.
 */
final class InFlightWork {
    private final Condition settled;
    private int count;

    InFlightWork(ReentrantLock regionLock) {
        this.settled = regionLock.newCondition();
    }

    /** One starts its driver calls off the lock. */
    void begin() {
        count++;
    }

    /** One has finished: wakes a grant waiting for none to be in flight. */
    void end() {
        if (--count == 0) settled.signalAll();
    }

    /** Waits, the lock released meanwhile, until none is in flight. */
    void awaitNone() {
        while (count > 0) settled.awaitUninterruptibly();
    }
}
