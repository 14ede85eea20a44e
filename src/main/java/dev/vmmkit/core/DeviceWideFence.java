package dev.vmmkit.core;

import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.StreamEvents;

import java.lang.System.Logger.Level;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * Waits for the whole device on a thread of its own, for cudaFree-style frees
 * ({@link VmmManager#DEVICE_WIDE_STREAM}). Such a free must wait for earlier work on every stream,
 * and no event on a stream the allocator knows covers a non-blocking stream it has never seen; a
 * device synchronisation does. Running it here means neither the freeing thread nor an allocation
 * blocks on it.
 *
 * <p>A device-wide free takes a {@linkplain #request ticket} (lock-free: an atomic increment, and an
 * unpark when the thread sleeps), and the slow path later reads whether it is
 * {@linkplain #completedTicket complete}. The thread, started on the first request, calls
 * {@link StreamEvents#synchronizeDevice} while tickets wait, then completes every ticket issued
 * before that synchronisation <em>started</em> ({@link #startedTicket}; work submitted before such
 * a ticket was queued before the synchronisation, so it is finished). Requests made meanwhile share
 * the next synchronisation. A failed synchronisation is logged once and retried after a pause; its
 * tickets stay waiting, so nothing is lost.
 *
 * <p>Between synchronisations the thread spins for {@value #SPIN_NANOS} ns before it parks: a
 * program that frees device-wide in a loop (cudaMalloc + cudaFree of one size) gets each free's
 * synchronisation started at once, with no wake-up latency (tens of microseconds) between, and an
 * idle program costs nothing after that.
 *
 * <p>Thread-safe: one per manager, shared by its regions.
 *
 * <p>{@link #onCallingThread} makes a fence without a thread, for seeded tests that must repeat
 * exactly: each request synchronises at once, on the caller's thread.
 */
final class DeviceWideFence implements AutoCloseable {
    static final String THREAD_NAME = "vmmkit-device-fence";
    private static final System.Logger LOG = System.getLogger(DeviceWideFence.class.getName());
    private static final long FIRST_RETRY_PAUSE_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
    private static final long LONGEST_RETRY_PAUSE_NANOS = TimeUnit.MILLISECONDS.toNanos(100);
    /** How long the thread looks for new tickets before it parks. */
    static final long SPIN_NANOS = 100_000;

    private final StreamEvents events;
    private final boolean onCallingThread;

    /** Tickets handed out; lock-free. */
    private final AtomicLong issued = new AtomicLong();
    /** The newest ticket a synchronisation has started for (it completes when that one returns). */
    private volatile long started;
    private volatile long completed;
    /** True while the thread is parked (a request unparks it). */
    private volatile boolean parked;
    private volatile boolean closed;
    private volatile Thread thread;
    // Guarded by this object's monitor.
    private RuntimeException lastFailure;
    /** The newest ticket that the failed synchronisation in {@link #lastFailure} would have completed. */
    private long failedUpTo;
    private boolean failureLogged;

    DeviceWideFence(StreamEvents events) {
        this(events, false);
    }

    private DeviceWideFence(StreamEvents events, boolean onCallingThread) {
        this.events = events;
        this.onCallingThread = onCallingThread;
    }

    /** A fence that synchronises inside {@link #request}, on the caller's thread (deterministic tests). */
    static DeviceWideFence onCallingThread(StreamEvents events) {
        return new DeviceWideFence(events, true);
    }

    /** A ticket that completes once a device synchronisation started after this call has finished. */
    long request() {
        if (onCallingThread) return requestOnCallingThread();
        long ticket = issued.incrementAndGet();
        Thread serving = thread;
        if (serving == null) {
            startThread();
        } else if (parked) {
            LockSupport.unpark(serving); // after the increment: a thread about to park sees the ticket
        }
        return ticket;
    }

    private synchronized long requestOnCallingThread() {
        long ticket = issued.incrementAndGet();
        if (!closed) synchronizeOnce(ticket);
        return ticket;
    }

    private synchronized void startThread() {
        if (thread == null && !closed) thread = Thread.ofPlatform().daemon().name(THREAD_NAME).start(this::serve);
    }

    /** The newest ticket whose synchronisation has started: a ticket issued later waits for the next one. */
    long startedTicket() {
        return started;
    }

    /** False for a fence that synchronises on the calling thread, whose every request costs a synchronisation. */
    boolean servesInBackground() {
        return !onCallingThread;
    }

    /** Every ticket up to the returned one is complete. A volatile read: no lock, no driver call. */
    long completedTicket() {
        return completed;
    }

    /**
     * Blocks until {@code ticket} is complete. Throws the failure of a device synchronisation that
     * would have completed it (the fence retries regardless), or IllegalStateException once closed.
     */
    synchronized void await(long ticket) {
        boolean interrupted = false;
        try {
            while (completed < ticket) {
                if (lastFailure != null && failedUpTo >= ticket) throw copyOf(lastFailure);
                if (closed) throw new IllegalStateException("the device-wide fence is closed");
                if (onCallingThread) {
                    synchronizeOnce(issued.get());
                    continue;
                }
                try {
                    wait();
                } catch (InterruptedException e) {
                    interrupted = true; // an allocation waits as cudaFree would; keep the flag for the caller
                }
            }
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
            while (completed < ticket && !closed) {
                if (lastFailure != null && failedUpTo >= ticket) return false;
                if (onCallingThread) {
                    synchronizeOnce(issued.get());
                    continue;
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) return false;
                try {
                    wait(left / 1_000_000, (int) (left % 1_000_000));
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
            return completed >= ticket;
        } finally {
            if (interrupted) Thread.currentThread().interrupt();
        }
    }

    /** Stops the thread, after a synchronisation it may be running; tickets still waiting never complete. */
    @Override
    public void close() {
        Thread serving;
        synchronized (this) {
            if (closed) return;
            closed = true;
            serving = thread;
            notifyAll();
        }
        if (serving == null) return;
        LockSupport.unpark(serving);
        serving.interrupt(); // cuts a retry pause short
        boolean interrupted = false;
        while (serving.isAlive()) {
            try {
                serving.join();
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        if (interrupted) Thread.currentThread().interrupt();
    }

    /** One attempt on the caller's thread, for {@link #onCallingThread}. */
    private synchronized void synchronizeOnce(long target) {
        started = target;
        try {
            events.synchronizeDevice();
        } catch (RuntimeException e) {
            failed(target, e);
            return;
        }
        completedUpTo(target);
    }

    private void serve() {
        try {
            serveUntilClosed();
        } finally {
            threadEnded();
        }
    }

    private void serveUntilClosed() {
        long retryPause = FIRST_RETRY_PAUSE_NANOS;
        while (true) {
            long target = nextTarget();
            if (target < 0) return;
            started = target;
            try {
                events.synchronizeDevice();
            } catch (RuntimeException e) {
                failed(target, e);
                if (!pause(retryPause)) return;
                retryPause = Math.min(2 * retryPause, LONGEST_RETRY_PAUSE_NANOS);
                continue;
            }
            retryPause = FIRST_RETRY_PAUSE_NANOS;
            completedUpTo(target);
        }
    }

    /**
     * Waits for a ticket not yet completed: spins a while, then parks; returns the newest one
     * issued, which the next synchronisation covers, or -1 once closed.
     */
    private long nextTarget() {
        long spinUntil = System.nanoTime() + SPIN_NANOS;
        while (!closed) {
            long newest = issued.get();
            if (newest != completed) return newest;
            if (System.nanoTime() - spinUntil < 0) {
                Thread.onSpinWait();
                continue;
            }
            parked = true;
            if (issued.get() == completed && !closed) LockSupport.park(this); // a request after this line unparks
            parked = false;
            Thread.interrupted(); // close() interrupts after setting closed; the loop condition tells
            spinUntil = System.nanoTime() + SPIN_NANOS;
        }
        return -1;
    }

    /** Normally after close; if an Error ended the thread early, the next request starts another. */
    private synchronized void threadEnded() {
        if (thread == Thread.currentThread()) thread = null;
    }

    private synchronized void completedUpTo(long target) {
        completed = target;
        lastFailure = null;
        notifyAll();
    }

    private synchronized void failed(long target, RuntimeException failure) {
        lastFailure = failure;
        failedUpTo = target;
        notifyAll();
        if (!failureLogged) {
            failureLogged = true;
            LOG.log(Level.WARNING, "device synchronisation for cudaFree-style frees failed; retrying "
                    + "(memory freed device-wide stays unused until one succeeds): " + failure.getMessage());
        }
    }

    /** Sleeps before a retry; false once closed. */
    private boolean pause(long nanos) {
        synchronized (this) {
            if (closed) return false;
        }
        try {
            TimeUnit.NANOSECONDS.sleep(nanos);
        } catch (InterruptedException e) {
            // close() interrupts; otherwise just retry sooner
        }
        synchronized (this) {
            return !closed;
        }
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
