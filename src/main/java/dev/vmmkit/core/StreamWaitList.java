package dev.vmmkit.core;

import dev.vmmkit.driver.StreamEvents;
import org.agrona.collections.Long2ObjectHashMap;

/**
 * The waiting list of seed 004: memory freed on a stream may still be touched by work queued on
 * that stream before the free, so it is not handed to other streams, unmapped or released until an
 * event recorded after the free has completed. Events are recorded lazily, on the slow path, so
 * {@code deallocate} never calls the driver.
 *
 * <p>Not thread-safe: each region owns one and uses it under the region's lock.
 */
final class StreamWaitList {
    /** Tag of free memory that no queued work can touch any more. */
    static final long NO_PENDING_WORK = Long.MIN_VALUE;

    private final StreamEvents events;
    private final Long2ObjectHashMap<Pending> pendingByStream = new Long2ObjectHashMap<>();

    StreamWaitList(StreamEvents events) {
        this.events = events;
    }

    /**
     * Frees on {@code stream} with a sequence number up to the returned value are complete; -1
     * when none is known yet. Records an event if none is in flight, so a later call can answer.
     */
    long completedUpTo(long stream, long currentSequence) {
        Pending p = pending(stream);
        long done = -1;
        if (p.recordedAtSequence >= 0) {
            if (!events.isComplete(p.event)) return -1;
            done = p.recordedAtSequence;
            p.recordedAtSequence = -1;
            if (done == currentSequence) return done;
        }
        events.record(p.event, VmmManager.eventStreamOf(stream));
        p.recordedAtSequence = currentSequence;
        if (events.isComplete(p.event)) {
            p.recordedAtSequence = -1;
            return currentSequence;
        }
        // The new event is still pending, but the completed one covers the frees up to `done`.
        return done;
    }

    /** Blocks until every free on {@code stream} up to {@code currentSequence} is complete. */
    void synchronize(long stream, long currentSequence) {
        Pending p = pending(stream);
        events.record(p.event, VmmManager.eventStreamOf(stream));
        events.synchronize(p.event);
        p.recordedAtSequence = -1;
    }

    /** Destroys the events this list created. */
    void close() {
        for (Pending p : pendingByStream.values()) {
            events.destroy(p.event);
        }
        pendingByStream.clear();
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
