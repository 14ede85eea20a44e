package dev.vmmkit.core;

import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/**
 * The CUDA stream captures under way in the process (a CUDA graph being recorded), and the
 * allocator's background driver calls that must not overlap them. A device synchronisation from
 * any thread while a stream of the device is capturing invalidates that capture, whatever its
 * capture mode, and the graph fails at its end; pinning host memory is among the calls CUDA counts
 * as unsafe beside a capture too. So the {@link DeviceWideFence} synchronises, {@link PinAhead}
 * pins, and a memory tag's pause or resume runs ({@link MemoryTags}; refused otherwise), only while
 * no capture is under way ({@link #startUnlessCapturing}), and a capture begins only once such a
 * call in progress has returned. No such call starts while a capture waits to begin, so calls that
 * keep overlapping (pinning ahead chunk after chunk) cannot hold a capture back for long. The shim reports each capture's
 * begin and end (cudaStreamBeginCapture, cudaStreamEndCapture and their driver counterparts).
 *
 * <p>Memory freed device-wide before a capture is synchronised as the capture begins (the native
 * cudaFree would have synchronised at each free), so it serves allocations made during the
 * capture. Memory freed device-wide while a capture is under way waits for its end before it is
 * reused; a request that would have to wait for it gets other memory or fails as out of memory,
 * rather than blocking the capturing program.
 *
 * <p>Thread-safe. Captures and synchronisations are rare next to allocations: one monitor.
 */
public final class StreamCaptures {
    /** Runs before each capture is counted: the fence synchronises for the frees published so far. */
    private final Runnable beforeBegin;
    private int underway;
    /** Calls started by {@link #startUnlessCapturing} and not yet finished. */
    private int running;
    /** Threads in {@link #awaitNone} (tests wait for a background thread to get there). */
    private int waiting;
    /** Captures waiting in {@link #beginning} for calls under way to return (tests wait for one to get there). */
    private int waitingToBegin;

    StreamCaptures(Runnable beforeBegin) {
        this.beforeBegin = beforeBegin;
    }

    /**
     * A capture is about to begin: synchronises for memory freed so far, waits until no call that
     * must not overlap it runs, then counts the capture.
     */
    public void beginning() {
        beforeBegin.run();
        count();
    }

    private synchronized void count() {
        boolean interrupted = false;
        waitingToBegin++;
        while (running > 0) {
            try {
                wait();
            } catch (InterruptedException e) {
                interrupted = true; // the capture must still wait; keep the flag for the caller
            }
        }
        waitingToBegin--;
        underway++;
        if (interrupted) Thread.currentThread().interrupt();
    }

    /**
     * Counts {@code captures} already under way when this allocator was made: nothing to
     * synchronise for (it has freed nothing), and no call of its runs yet.
     */
    public synchronized void adopt(int captures) {
        underway += captures;
    }

    /** A capture counted by {@link #beginning} ended, or failed to begin. */
    public synchronized void ended() {
        if (underway > 0 && --underway == 0) notifyAll();
    }

    /** True while a capture is under way (counted). */
    public synchronized boolean underway() {
        return underway > 0;
    }

    /** True while a capture is under way or waits to begin: no call that must not overlap one may start. */
    synchronized boolean holdsCallsBack() {
        return underway > 0 || waitingToBegin > 0;
    }

    /** Starts a call that must not overlap a capture, unless one is under way or waits to begin (then false: it may not run). */
    synchronized boolean startUnlessCapturing() {
        if (holdsCallsBack()) return false;
        running++;
        return true;
    }

    /** The call {@link #startUnlessCapturing} allowed has returned. */
    synchronized void finished() {
        running--;
        notifyAll();
    }

    /** Waits at most {@code nanos} until no capture is under way or waits to begin; true when none is. */
    synchronized boolean awaitNone(long nanos) throws InterruptedException {
        long deadline = System.nanoTime() + nanos;
        waiting++;
        try {
            while (holdsCallsBack()) {
                long left = deadline - System.nanoTime();
                if (left <= 0) return false;
                TimeUnit.NANOSECONDS.timedWait(this, left);
            }
            return true;
        } finally {
            waiting--;
        }
    }

    /** Waits until no capture is under way or {@code stop} says so; false when stopped. */
    boolean awaitNone(BooleanSupplier stop) {
        while (!stop.getAsBoolean()) {
            try {
                if (awaitNone(TimeUnit.MILLISECONDS.toNanos(100))) return true;
            } catch (InterruptedException e) {
                // a close interrupts; stop tells
            }
        }
        return false;
    }

    /** Threads waiting for a capture's end now (tests). */
    synchronized int waiting() {
        return waiting;
    }

    /** Captures waiting to begin now, until the calls under way return (tests). */
    synchronized int waitingToBegin() {
        return waitingToBegin;
    }
}
