package dev.vmmkit.core;

import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

/**
 * How the {@link DeviceWideFence}'s thread puts off a lone synchronisation for frees nobody can use
 * yet: it waits a grace, and then, while allocating threads are inside a slow path's driver calls,
 * up to a hold more. A device synchronisation on another thread slows those calls, and a program's
 * first large allocation comes right after its first free (a runtime's start-up cudaFree), so the
 * two used to overlap: a first 1 GiB cudaMalloc on an H100 took 308.8 us without the grace and
 * 238.4 with it, 547.2 and 440.9 at 4 GiB (docs/cold-path.md).
 *
 * <p>Slow paths count themselves in and out around their driver calls ({@link #requestDriving},
 * {@link #requestDriven}); the last one out wakes the thread only once its grace is over (during
 * the grace the wake-up would find nothing to do, and a wake-up costs the allocating thread
 * microseconds: a program's first large allocation comes inside the grace of its first free).
 * Whatever else may end the wait calls {@link #wakeIfWaiting} after writing what ends it. Frees do
 * not: the synchronisation at the wait's end covers them, and a burst of cudaFrees would pay a
 * wake-up each.
 *
 * <p>Thread-safe: {@link #await} runs on the fence's thread alone, the rest on any thread.
 */
final class SynchronisationPutOff {
    /**
     * How long a lone synchronisation is put off. The system property
     * {@code vmmkit.fence.graceNanos} sets it (0: none), to measure what it saves.
     */
    static final long GRACE_NANOS = Math.max(0, Long.getLong("vmmkit.fence.graceNanos", 1_000_000));
    /**
     * The longest it is held after its grace while allocating threads are inside a slow path's
     * driver calls. The system property {@code vmmkit.fence.holdNanos} sets it (0: never held).
     */
    static final long HOLD_NANOS = Math.max(0, Long.getLong("vmmkit.fence.holdNanos", 2_000_000));

    private final long graceNanos;
    private final long holdNanos;
    /** Allocating threads inside a slow path's driver calls (create, map, setAccess). */
    private final AtomicInteger requestsDriving = new AtomicInteger();
    /** The thread in {@link #await}, or null. */
    private volatile Thread waiting;
    /** The thread in {@link #await} once its grace is over (it waits for slow paths alone), or null. */
    private volatile Thread waitingPastGrace;
    /** Threads unparked so far (tests). */
    private final AtomicInteger wakeUps = new AtomicInteger();

    SynchronisationPutOff(long graceNanos, long holdNanos) {
        this.graceNanos = graceNanos;
        this.holdNanos = holdNanos;
    }

    /** An allocating thread enters a slow path's driver calls; {@link #requestDriven} when it leaves them (in a finally). */
    void requestDriving() {
        requestsDriving.incrementAndGet();
    }

    /** An allocating thread left a slow path's driver calls: the wait may end when it was the last. */
    void requestDriven() {
        if (requestsDriving.decrementAndGet() == 0) wake(waitingPastGrace);
    }

    /** Unparks the thread in {@link #await}, if any: called after writing what ends its wait. */
    void wakeIfWaiting() {
        wake(waiting);
    }

    private void wake(Thread thread) {
        if (thread == null) return;
        wakeUps.incrementAndGet();
        LockSupport.unpark(thread);
    }

    /**
     * Parks the calling thread for the grace, then while allocating threads are inside a slow
     * path's driver calls, at most the hold more; returns at once when {@code ended} says so
     * (checked after each wake-up). Returns at once when there is nothing to wait for.
     */
    void await(BooleanSupplier ended) {
        if (graceNanos == 0 && (holdNanos == 0 || requestsDriving.get() == 0)) return;
        long graceEnd = System.nanoTime() + graceNanos;
        long latest = graceEnd + holdNanos;
        waiting = Thread.currentThread(); // whatever ends the wait after this line unparks
        try {
            while (!ended.getAsBoolean()) {
                long now = System.nanoTime();
                if (now - graceEnd < 0) {
                    LockSupport.parkNanos(this, graceEnd - now);
                    continue;
                }
                // Published before the count is read, as requestDriven counts down before it reads
                // this: either the count reads zero here or the last slow path out wakes this thread.
                waitingPastGrace = waiting;
                if (requestsDriving.get() == 0 || now - latest >= 0) return;
                LockSupport.parkNanos(this, latest - now);
            }
        } finally {
            waitingPastGrace = null;
            waiting = null;
        }
    }

    /** Whether a thread waits in {@link #await} now (tests). */
    boolean waiting() {
        return waiting != null;
    }

    /** Whether a thread waits in {@link #await} past its grace, for slow paths alone (tests). */
    boolean pastGrace() {
        return waitingPastGrace != null;
    }

    /** Threads unparked so far (tests: what a wake-up was spent on). */
    int wakeUps() {
        return wakeUps.get();
    }

    /** Allocating threads inside a slow path's driver calls now (tests: none once every call returned). */
    int requestsDriving() {
        return requestsDriving.get();
    }
}
