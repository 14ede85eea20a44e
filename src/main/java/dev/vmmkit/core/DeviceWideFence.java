package dev.vmmkit.core;

import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.StreamEvents;

import java.lang.System.Logger.Level;
import java.util.concurrent.TimeUnit;

/**
 * Waits for the whole device on a thread of its own, for cudaFree-style frees
 * ({@link VmmManager#DEVICE_WIDE_STREAM}). Such a free must wait for earlier work on every stream,
 * and no event on a stream the allocator knows covers a non-blocking stream it has never seen; a
 * device synchronisation does. Running it here means neither the freeing thread nor an allocation
 * blocks on it.
 *
 * <p>The slow path takes a {@linkplain #request ticket} and later reads whether it is
 * {@linkplain #completedTicket complete}. The thread, started on the first request, calls
 * {@link StreamEvents#synchronizeDevice} while tickets wait, then completes every ticket issued
 * before that synchronisation <em>started</em> (work submitted before such a ticket was queued
 * before the synchronisation, so it is finished). Requests made meanwhile share the next
 * synchronisation. A failed synchronisation is logged once and retried after a pause; its tickets
 * stay waiting, so nothing is lost.
 *
 * <p>Thread-safe: one per manager, shared by its regions. The free path never touches it.
 *
 * <p>{@link #onCallingThread} makes a fence without a thread, for seeded tests that must repeat
 * exactly: each request synchronises at once, on the caller's thread.
 */
final class DeviceWideFence implements AutoCloseable {
    static final String THREAD_NAME = "vmmkit-device-fence";
    private static final System.Logger LOG = System.getLogger(DeviceWideFence.class.getName());
    private static final long FIRST_RETRY_PAUSE_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
    private static final long LONGEST_RETRY_PAUSE_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

    private final StreamEvents events;
    private final boolean onCallingThread;

    // Guarded by this object's monitor; completed is also read without it.
    private long issued;
    private volatile long completed;
    private RuntimeException lastFailure;
    /** The newest ticket that the failed synchronisation in {@link #lastFailure} would have completed. */
    private long failedUpTo;
    private boolean failureLogged;
    private boolean closed;
    private Thread thread;

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
    synchronized long request() {
        long ticket = ++issued;
        if (onCallingThread) {
            if (!closed) synchronizeOnce(ticket);
            return ticket;
        }
        if (thread == null && !closed) {
            thread = Thread.ofPlatform().daemon().name(THREAD_NAME).start(this::serve);
        }
        notifyAll();
        return ticket;
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
                    synchronizeOnce(issued);
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
                    synchronizeOnce(issued);
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

    /** Waits for a ticket; returns the newest one issued, which the next synchronisation covers, or -1 once closed. */
    private synchronized long nextTarget() {
        while (!closed && issued == completed) {
            try {
                wait();
            } catch (InterruptedException e) {
                // close() interrupts after setting closed; the loop condition tells
            }
        }
        return closed ? -1 : issued;
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
