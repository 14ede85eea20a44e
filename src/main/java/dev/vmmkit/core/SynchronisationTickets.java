package dev.vmmkit.core;

import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverException;

import java.lang.System.Logger.Level;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.function.LongConsumer;

/**
 * The {@link DeviceWideFence}'s tickets and the waits for them. A ticket is {@linkplain #issue
 * issued} lock-free (an atomic increment). Whoever serves the fence marks the newest ticket a
 * device synchronisation {@linkplain #markStarted started} for, and when it returns
 * {@linkplain #completedUpTo completes} every ticket up to that one, or {@linkplain #failed
 * records its failure}: waits for tickets up to the failed one then fail (or give up) until a
 * later synchronisation completes, while later tickets go on waiting. Whether a ticket is complete
 * is a volatile read; a wait sleeps on this object's monitor.
 *
 * <p>No synchronisation runs while a stream capture is under way: a wait without a time limit
 * fails meanwhile, as for a failed synchronisation, so a capturing thread that allocates never
 * blocks on memory the capture itself holds back. Once closed, no ticket completes any more and
 * every wait fails or gives up.
 *
 * <p>A fence on the calling thread has no thread to serve it: {@code serveHere} synchronises for
 * the newest ticket, under this monitor so one at a time, when a ticket is issued
 * ({@link #issueAndServeHere}) and in any wait that finds its ticket incomplete.
 *
 * <p>Thread-safe.
 */
final class SynchronisationTickets {
    /** The fence's logger: a reader of the log knows the fence, not its tickets. */
    private static final System.Logger LOG = System.getLogger(DeviceWideFence.class.getName());
    /** How long a timed wait for published frees polls before it sleeps (a synchronisation takes microseconds). */
    static final long WAIT_SPIN_NANOS = 50_000;

    // Slots of {@link #progress}, 128 bytes apart, on lines apart from what frees read (the fence's
    // PARKED): the serving thread writes both at every synchronisation.
    private static final int STARTED = 16;
    private static final int COMPLETED = 32;

    /** Stream captures under way, during which waits without a time limit fail. */
    private final StreamCaptures captures;
    /** Synchronises for a ticket on the calling thread; null when a thread serves the fence. */
    private final LongConsumer serveHere;
    /** Tickets handed out; lock-free. */
    private final AtomicLong issued = new AtomicLong();
    /**
     * STARTED: the newest ticket a synchronisation has started for (it completes when that one
     * returns); COMPLETED: every ticket up to it is complete.
     */
    private final AtomicLongArray progress = new AtomicLongArray(48);
    /**
     * Threads waiting on the monitor; changed under it. The serving thread takes the monitor after
     * a synchronisation only while some thread waits (or a failure is to be cleared), so one that
     * nobody waits for takes no lock.
     */
    private volatile int waiters;
    private volatile boolean closed;
    // Guarded by this object's monitor (lastFailure is also read without it, to skip the monitor).
    private volatile RuntimeException lastFailure;
    /** The newest ticket that the failed synchronisation in {@link #lastFailure} would have completed. */
    private long failedUpTo;
    private boolean failureLogged;

    SynchronisationTickets(StreamCaptures captures, LongConsumer serveHere) {
        this.captures = captures;
        this.serveHere = serveHere;
    }

    /** A new ticket; lock-free. The serving thread learns of it from {@link #newestIssued}. */
    long issue() {
        return issued.incrementAndGet();
    }

    /** A new ticket, synchronised for at once on the calling thread unless closed (no thread serves). */
    synchronized long issueAndServeHere() {
        long ticket = issued.incrementAndGet();
        if (!closed) serveHere.accept(ticket);
        return ticket;
    }

    /** The newest ticket issued. */
    long newestIssued() {
        return issued.get();
    }

    /** A device synchronisation starts for the tickets up to {@code target}. */
    void markStarted(long target) {
        progress.set(STARTED, target);
    }

    /** The newest ticket whose synchronisation has started: a ticket issued later waits for the next one. */
    long startedTicket() {
        return progress.get(STARTED);
    }

    /** Every ticket up to the returned one is complete. A volatile read: no lock, no driver call. */
    long completedTicket() {
        return progress.get(COMPLETED);
    }

    /**
     * Completes the tickets up to {@code target}. A waiter counts itself before it reads COMPLETED,
     * and this reads the count after writing it, so either the waiter sees the ticket complete or
     * this sees the waiter and notifies.
     */
    void completedUpTo(long target) {
        progress.set(COMPLETED, target);
        if (waiters == 0 && lastFailure == null) return;
        synchronized (this) {
            lastFailure = null;
            notifyAll();
        }
    }

    /** The synchronisation for the tickets up to {@code target} failed: their waits fail until one succeeds. */
    synchronized void failed(long target, RuntimeException failure) {
        lastFailure = failure;
        failedUpTo = target;
        notifyAll();
        if (!failureLogged) {
            failureLogged = true;
            LOG.log(Level.WARNING, "device synchronisation for cudaFree-style frees failed; retrying "
                    + "(memory freed device-wide stays unused until one succeeds): " + failure.getMessage());
        }
    }

    /** Wakes every wait to look again: a stream capture has begun, so the waits without a time limit fail. */
    synchronized void wakeWaits() {
        notifyAll();
    }

    /** Fails every wait, now and later; false when already closed. */
    synchronized boolean close() {
        if (closed) return false;
        closed = true;
        notifyAll();
        return true;
    }

    /** True once closed: the serving thread stops. */
    boolean closed() {
        return closed;
    }

    /**
     * Blocks until {@code ticket} is complete. Throws the failure of a device synchronisation that
     * would have completed it (the fence retries regardless), a DriverException
     * (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) while a stream capture is under way, or
     * IllegalStateException once closed.
     */
    void await(long ticket) {
        if (!awaitUnlessCapturing(ticket)) throw captureUnderway();
    }

    /**
     * As {@link #await(long)}, but returns false at once while a stream capture is under way (the
     * ticket's synchronisation cannot run before the capture ends); true once the ticket completed.
     */
    synchronized boolean awaitUnlessCapturing(long ticket) {
        boolean interrupted = false;
        try {
            while (completedTicket() < ticket) {
                if (lastFailure != null && failedUpTo >= ticket) throw copyOf(lastFailure);
                if (closed) throw new IllegalStateException("the device-wide fence is closed");
                if (captures.holdsCallsBack()) return false;
                if (serveHere != null) {
                    serveHere.accept(issued.get());
                    continue;
                }
                waiters++;
                try {
                    if (completedTicket() < ticket) wait();
                } catch (InterruptedException e) {
                    interrupted = true; // an allocation waits as cudaFree would; keep the flag for the caller
                } finally {
                    waiters--;
                }
            }
            return true;
        } finally {
            if (interrupted) Thread.currentThread().interrupt();
        }
    }

    /**
     * Waits at most {@code timeoutNanos} for {@code ticket}; true when it completed. Never throws for
     * a failed synchronisation: the caller simply goes on without the memory.
     */
    synchronized boolean await(long ticket, long timeoutNanos) {
        long deadline = System.nanoTime() + timeoutNanos;
        boolean interrupted = false;
        try {
            while (completedTicket() < ticket && !closed) {
                if (lastFailure != null && failedUpTo >= ticket) return false;
                if (serveHere != null) {
                    serveHere.accept(issued.get());
                    continue;
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) return false;
                waiters++;
                try {
                    if (completedTicket() < ticket) wait(left / 1_000_000, (int) (left % 1_000_000));
                } catch (InterruptedException e) {
                    interrupted = true;
                } finally {
                    waiters--;
                }
            }
            return completedTicket() >= ticket;
        } finally {
            if (interrupted) Thread.currentThread().interrupt();
        }
    }

    /**
     * Waits at most {@code timeoutNanos} until the frees of {@code frees} up to {@code sequence} are
     * covered; true when they are. Polls, then sleeps on the monitor (the serving thread notifies
     * after each synchronisation). Never throws for a failed synchronisation: the caller goes on
     * without the memory.
     */
    boolean awaitCovered(DeviceWideFrees frees, long sequence, long timeoutNanos) {
        long start = System.nanoTime();
        while (frees.covered() < sequence && !closed) {
            long waited = System.nanoTime() - start;
            if (waited >= timeoutNanos) return false;
            if (waited < WAIT_SPIN_NANOS) {
                Thread.onSpinWait();
                continue;
            }
            if (!sleepUntilNotified(frees, sequence, timeoutNanos - waited)) return frees.covered() >= sequence;
        }
        return frees.covered() >= sequence;
    }

    /** One timed monitor wait for {@link #awaitCovered}; false when interrupted (the flag is kept). */
    private synchronized boolean sleepUntilNotified(DeviceWideFrees frees, long sequence, long nanos) {
        waiters++;
        try {
            if (frees.covered() < sequence && !closed) wait(nanos / 1_000_000, (int) (nanos % 1_000_000));
            return true;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        } finally {
            waiters--;
        }
    }

    /** What a wait without a time limit throws while a stream capture is under way. */
    static DriverException captureUnderway() {
        return new DriverException(CudaResult.STREAM_CAPTURE_UNSUPPORTED, "memory freed with cudaFree is not reused while"
                + " a CUDA stream capture is under way: the device synchronisation it waits for would invalidate"
                + " the capture", "cuCtxSynchronize()");
    }

    /** A new exception for the waiting thread, so that threads never share (and mutate) one instance. */
    private static RuntimeException copyOf(RuntimeException failure) {
        RuntimeException copy = failure instanceof DriverException d
                ? new DriverException(d.result(), d.driverMessage(), d.call())
                : new IllegalStateException("device synchronisation failed: " + failure.getMessage());
        copy.initCause(failure);
        return copy;
    }
}
