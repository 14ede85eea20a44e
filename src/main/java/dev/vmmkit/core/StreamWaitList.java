package dev.vmmkit.core;

import dev.vmmkit.driver.StreamEvents;
import org.agrona.collections.Long2ObjectHashMap;

/**
 * The waiting list of seed 004: memory freed on a stream may still be touched by work queued on
 * that stream before the free, so it is not handed to other streams, unmapped or released until an
 * event recorded on that stream after the free has completed.
 *
 * <p>A free on {@link VmmManager#DEVICE_WIDE_STREAM} (cudaFree) waits for earlier work on every
 * stream instead, non-blocking ones included, which no event on a known stream covers: it waits
 * for a device synchronisation that the manager's {@link DeviceWideFence} runs on its own thread
 * and that started after the free.
 *
 * <p>Events are recorded lazily on the slow path, so {@code deallocate} never calls the driver and
 * never waits. A device-wide free asks the fence for a synchronisation at once
 * ({@link #freedDeviceWide}: a lock-free ticket, no driver call), so that by the time the memory is
 * wanted again the synchronisation has usually finished: a cudaMalloc + cudaFree loop of one size
 * then finds its earlier blocks reusable instead of waiting. Frees made while a requested
 * synchronisation has not started yet share it. At most two tickets are in flight: the fence
 * serves them in order.
 *
 * <p>Not thread-safe: each region owns one and uses it under the region's lock.
 */
final class StreamWaitList {
    /** Tag of free memory that no queued work can touch any more. */
    static final long NO_PENDING_WORK = Long.MIN_VALUE;
    private static final long NO_TICKET = 0;
    /** How long a wait for an event polls before it sleeps between queries. */
    static final long EVENT_SPIN_NANOS = 50_000;

    private final StreamEvents events;
    private final DeviceWideFence deviceFence;
    private final Long2ObjectHashMap<Pending> pendingByStream = new Long2ObjectHashMap<>();

    // Fence tickets in flight for device-wide frees, older first, each with the free sequence it
    // covers; and the newest sequence known complete.
    private long olderTicket = NO_TICKET;
    private long olderSequence = -1;
    private long newerTicket = NO_TICKET;
    private long newerSequence = -1;
    private long deviceWideCompleted = -1;
    /** Where frees ask for a synchronisation themselves; not with a fence that synchronises on the calling thread. */
    private final boolean requestAtFree;

    StreamWaitList(StreamEvents events, DeviceWideFence deviceFence) {
        this.events = events;
        this.deviceFence = deviceFence;
        this.requestAtFree = deviceFence.servesInBackground();
    }

    /** A device-wide free of sequence number {@code sequence} was made: a synchronisation started after now will cover it. */
    void freedDeviceWide(long sequence) {
        if (requestAtFree) requestCovering(sequence, false);
    }

    /**
     * Frees on {@code stream} with a sequence number up to the returned value are complete; -1
     * when none is known yet. Records an event (or requests a device synchronisation) if none is
     * in flight, so a later call can answer.
     */
    long completedUpTo(long stream, long currentSequence) {
        if (stream == VmmManager.DEVICE_WIDE_STREAM) return deviceWideCompletedUpTo(currentSequence);
        Pending p = pending(stream);
        long done = -1;
        if (p.recordedAtSequence >= 0) {
            if (!events.isComplete(p.event)) return -1;
            done = p.recordedAtSequence;
            p.recordedAtSequence = -1;
            if (done == currentSequence) return done;
        }
        events.record(p.event, stream);
        p.recordedAtSequence = currentSequence;
        if (events.isComplete(p.event)) {
            p.recordedAtSequence = -1;
            return currentSequence;
        }
        // The new event is still pending, but the completed one covers the frees up to `done`.
        return done;
    }

    /**
     * Blocks until every free on {@code stream} up to {@code currentSequence} is complete. If that
     * fails, what was in flight stays in flight, so a later call can still answer.
     */
    void synchronize(long stream, long currentSequence) {
        if (stream == VmmManager.DEVICE_WIDE_STREAM) {
            long ticket = deviceFence.request();
            deviceFence.await(ticket);
            deviceWideCompleted = Math.max(deviceWideCompleted, currentSequence);
            collapseCompleted();
            return;
        }
        Pending p = pending(stream);
        events.record(p.event, stream);
        events.synchronize(p.event);
        p.recordedAtSequence = -1;
    }

    /**
     * The first half of a wait that runs without the region's lock: makes sure an event recorded
     * after the free of {@code currentSequence} (for {@link VmmManager#DEVICE_WIDE_STREAM}: a
     * device synchronisation requested after it) is in flight, and returns what to
     * {@link #await}: the event, or the fence ticket. {@code fresh} records a new one even if one
     * is in flight (a wait that must succeed, after an earlier synchronisation failed).
     */
    long waitToken(long stream, long currentSequence, boolean fresh) {
        if (stream == VmmManager.DEVICE_WIDE_STREAM) {
            collapseCompleted();
            if (fresh || trackedSequence() < currentSequence) requestCovering(currentSequence, fresh);
            return newerTicket != NO_TICKET ? newerTicket : deviceFence.completedTicket();
        }
        Pending p = pending(stream);
        if (fresh || p.recordedAtSequence < currentSequence) {
            events.record(p.event, stream);
            p.recordedAtSequence = currentSequence;
        }
        return p.event;
    }

    /**
     * The second half: waits for the work behind {@code token} at most {@code timeoutNanos}
     * (forever when negative); true when it completed. Safe without the region's lock: it only
     * queries the event or the fence (thread-safe), and the region keeps the event alive while a
     * wait is in flight. The state stays as it was; a later {@link #completedUpTo} notices.
     */
    boolean await(long stream, long token, long timeoutNanos) {
        if (stream == VmmManager.DEVICE_WIDE_STREAM) {
            if (timeoutNanos < 0) {
                deviceFence.await(token);
                return true;
            }
            return deviceFence.await(token, timeoutNanos);
        }
        if (timeoutNanos < 0) {
            events.synchronize(token);
            return true;
        }
        // Poll without sleeping first: an event recorded on an idle stream completes within
        // microseconds, and the shortest park is tens of them (timer slack).
        long start = System.nanoTime();
        while (!events.isComplete(token)) {
            long waited = System.nanoTime() - start;
            if (waited >= timeoutNanos) return false;
            if (waited < EVENT_SPIN_NANOS) Thread.onSpinWait();
            else java.util.concurrent.locks.LockSupport.parkNanos(10_000);
        }
        return true;
    }

    /** True when no event of {@code stream} is in flight, so the stream can be forgotten. */
    boolean isIdle(long stream) {
        Pending p = pendingByStream.get(stream);
        return p == null || p.recordedAtSequence < 0;
    }

    /** Destroys the event of an idle {@code stream}: a program may use thousands of short-lived streams. */
    void forget(long stream) {
        Pending p = pendingByStream.remove(stream);
        if (p == null) return;
        try {
            events.destroy(p.event);
        } catch (RuntimeException ignored) {
            // A leaked event costs less than a failed allocation: the driver frees it at exit.
        }
    }

    int trackedStreams() {
        return pendingByStream.size();
    }

    /** Destroys the events this list created. */
    void close() {
        for (Pending p : pendingByStream.values()) {
            events.destroy(p.event);
        }
        pendingByStream.clear();
    }

    /** As {@link #completedUpTo}, with fence tickets in the role of the event. */
    private long deviceWideCompletedUpTo(long currentSequence) {
        collapseCompleted();
        // Frees the fence was not asked about at free time (a calling-thread fence, a resize's tail).
        if (trackedSequence() < currentSequence) {
            requestCovering(currentSequence, false);
            collapseCompleted(); // a calling-thread fence has synchronised already
        }
        return deviceWideCompleted;
    }

    /** The newest free sequence a ticket in flight (or a completed one) covers. */
    private long trackedSequence() {
        return newerTicket != NO_TICKET ? newerSequence : deviceWideCompleted;
    }

    /**
     * Makes sure a ticket whose synchronisation starts after now covers {@code sequence}: the newer
     * ticket when its synchronisation has not started (and {@code fresh} is false), else a new
     * one. The older ticket, if still in flight, then folds into the newer (completing the newer
     * completes it too: the fence completes tickets in order).
     */
    private void requestCovering(long sequence, boolean fresh) {
        collapseCompleted();
        if (!fresh && newerTicket != NO_TICKET && deviceFence.startedTicket() < newerTicket) {
            newerSequence = Math.max(newerSequence, sequence);
            return;
        }
        if (newerTicket != NO_TICKET) {
            olderTicket = newerTicket;
            olderSequence = newerSequence;
        }
        newerTicket = deviceFence.request();
        newerSequence = sequence;
        collapseCompleted();
    }

    /** Moves what the fence has completed out of the tickets in flight. */
    private void collapseCompleted() {
        long done = deviceFence.completedTicket();
        if (newerTicket != NO_TICKET && done >= newerTicket) {
            deviceWideCompleted = Math.max(deviceWideCompleted, newerSequence);
            newerTicket = NO_TICKET;
            olderTicket = NO_TICKET;
        } else if (olderTicket != NO_TICKET && done >= olderTicket) {
            deviceWideCompleted = Math.max(deviceWideCompleted, olderSequence);
            olderTicket = NO_TICKET;
        }
    }

    private Pending pending(long stream) {
        Pending p = pendingByStream.get(stream);
        if (p == null) {
            p = new Pending(events.create());
            pendingByStream.put(stream, p);
        }
        return p;
    }

    private static final class Pending {
        final long event;
        long recordedAtSequence = -1;

        Pending(long event) {
            this.event = event;
        }
    }
}
