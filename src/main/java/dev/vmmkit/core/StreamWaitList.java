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
 * <p>Events are recorded, and device synchronisations requested, lazily on the slow path, so
 * {@code deallocate} never calls the driver and never waits.
 *
 * <p>Not thread-safe: each region owns one and uses it under the region's lock.
 */
final class StreamWaitList {
    /** Tag of free memory that no queued work can touch any more. */
    static final long NO_PENDING_WORK = Long.MIN_VALUE;
    private static final long NO_TICKET = 0;

    private final StreamEvents events;
    private final DeviceWideFence deviceFence;
    private final Long2ObjectHashMap<Pending> pendingByStream = new Long2ObjectHashMap<>();

    // The fence ticket in flight for device-wide frees, and the free sequence it covers.
    private long deviceWideTicket = NO_TICKET;
    private long deviceWideTicketSequence = -1;

    StreamWaitList(StreamEvents events, DeviceWideFence deviceFence) {
        this.events = events;
        this.deviceFence = deviceFence;
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
            requestDeviceSynchronisation(currentSequence);
            deviceFence.await(deviceWideTicket);
            deviceWideTicket = NO_TICKET;
            return;
        }
        Pending p = pending(stream);
        events.record(p.event, stream);
        events.synchronize(p.event);
        p.recordedAtSequence = -1;
    }

    /**
     * Waits at most {@code timeoutNanos} for the frees on {@code stream} up to
     * {@code currentSequence}; true when they completed. Used on the slow path only, when waiting
     * briefly beats mapping more memory.
     */
    boolean awaitBriefly(long stream, long currentSequence, long timeoutNanos) {
        if (stream == VmmManager.DEVICE_WIDE_STREAM) {
            if (deviceWideTicket == NO_TICKET || deviceWideTicketSequence < currentSequence) {
                requestDeviceSynchronisation(currentSequence);
            }
            if (!deviceFence.await(deviceWideTicket, timeoutNanos)) return false;
            deviceWideTicket = NO_TICKET;
            return true;
        }
        Pending p = pending(stream);
        if (p.recordedAtSequence < currentSequence) {
            events.record(p.event, stream);
            p.recordedAtSequence = currentSequence;
        }
        long deadline = System.nanoTime() + timeoutNanos;
        while (!events.isComplete(p.event)) {
            if (System.nanoTime() - deadline >= 0) return false;
            java.util.concurrent.locks.LockSupport.parkNanos(10_000);
        }
        p.recordedAtSequence = -1;
        return true;
    }

    /** Destroys the events this list created. */
    void close() {
        for (Pending p : pendingByStream.values()) {
            events.destroy(p.event);
        }
        pendingByStream.clear();
    }

    /** As {@link #completedUpTo}, with a fence ticket in the role of the event. */
    private long deviceWideCompletedUpTo(long currentSequence) {
        long done = -1;
        if (deviceWideTicket != NO_TICKET) {
            if (deviceFence.completedTicket() < deviceWideTicket) return -1;
            done = deviceWideTicketSequence;
            deviceWideTicket = NO_TICKET;
            if (done == currentSequence) return done;
        }
        requestDeviceSynchronisation(currentSequence);
        if (deviceFence.completedTicket() >= deviceWideTicket) {
            // Already done: only with a fence that synchronises on the calling thread (tests).
            deviceWideTicket = NO_TICKET;
            return currentSequence;
        }
        return done;
    }

    private void requestDeviceSynchronisation(long currentSequence) {
        deviceWideTicket = deviceFence.request();
        deviceWideTicketSequence = currentSequence;
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
