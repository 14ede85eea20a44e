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
 * never waits. A device-wide free publishes its sequence number to the fence at once
 * ({@link #freedDeviceWide}: a store to a line of this region's own, no driver call, no atomic
 * read-modify-write), so that by the time the memory is wanted again a synchronisation that
 * started after the free has usually finished: a cudaMalloc + cudaFree loop of one size then finds
 * its earlier blocks reusable instead of waiting. Frees published before a synchronisation starts
 * share it; a cache miss reads how far the finished ones reach ({@link DeviceWideFrees#covered}).
 *
 * <p>Not thread-safe: each region owns one and uses it under the region's lock.
 */
final class StreamWaitList {
    /** Tag of free memory that no queued work can touch any more. */
    static final long NO_PENDING_WORK = Long.MIN_VALUE;
    /** How long a wait for an event polls before it sleeps between queries. */
    static final long EVENT_SPIN_NANOS = 50_000;

    private final StreamEvents events;
    private final DeviceWideFence deviceFence;
    private final Long2ObjectHashMap<Pending> pendingByStream = new Long2ObjectHashMap<>();

    /** This region's device-wide frees, as the fence sees them. */
    private final DeviceWideFrees deviceWide;
    /** False with a fence that synchronises on the calling thread: frees do not ask it, misses do. */
    private final boolean publishAtFree;

    StreamWaitList(StreamEvents events, DeviceWideFence deviceFence) {
        this.events = events;
        this.deviceFence = deviceFence;
        this.deviceWide = deviceFence.register();
        this.publishAtFree = deviceFence.publishesAtFree();
    }

    /** A device-wide free of sequence number {@code sequence} was made: a synchronisation started after now will cover it. */
    void freedDeviceWide(long sequence) {
        if (!publishAtFree) return;
        deviceWide.publish(sequence);
        deviceFence.wake();
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
            deviceWide.publish(currentSequence);
            deviceFence.await(deviceFence.request()); // its synchronisation reads what was just published
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
     * device synchronisation that will read the free's sequence) is in flight, and returns what to
     * {@link #await}: the event; for device-wide frees the sequence itself, or with {@code fresh}
     * a fence ticket. {@code fresh} records a new event even if one is in flight, and asks for a
     * synchronisation of its own (a wait that must succeed, and report a failure, after an earlier
     * synchronisation failed).
     */
    long waitToken(long stream, long currentSequence, boolean fresh) {
        if (stream == VmmManager.DEVICE_WIDE_STREAM) {
            deviceWide.publish(currentSequence);
            if (fresh) return deviceFence.request(); // it reads what was just published
            deviceFence.wake();
            return currentSequence;
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
     * (forever when negative, except that device-wide frees are given up at once while a stream
     * capture is under way); true when it completed. Safe without the region's lock: it only
     * queries the event or the fence (thread-safe), and the region keeps the event alive while a
     * wait is in flight. The state stays as it was; a later {@link #completedUpTo} notices.
     */
    boolean await(long stream, long token, long timeoutNanos) {
        if (stream == VmmManager.DEVICE_WIDE_STREAM) {
            if (timeoutNanos >= 0) return deviceFence.awaitCovered(deviceWide, token, timeoutNanos);
            return deviceFence.awaitUnlessCapturing(token); // during a capture the frees wait for its end
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

    /** Destroys the events this list created; the fence forgets this region. */
    void close() {
        deviceFence.forget(deviceWide);
        for (Pending p : pendingByStream.values()) {
            events.destroy(p.event);
        }
        pendingByStream.clear();
    }

    /** The newest device-wide free published to the fence: a read, no driver call. */
    long deviceWidePublished() {
        return deviceWide.published();
    }

    /** How far the fence has covered this region's device-wide frees: a read, no driver call, no request. */
    long deviceWideCovered() {
        return deviceWide.covered();
    }

    /**
     * As {@link #completedUpTo}, with the fence's covered sequence in the role of the event: one
     * read of a line the fence's thread writes once per synchronisation.
     */
    private long deviceWideCompletedUpTo(long currentSequence) {
        long covered = deviceWide.covered();
        if (covered >= currentSequence) return covered;
        // Frees the fence was not told of at free time (a calling-thread fence, a resize's tail).
        if (deviceWide.published() < currentSequence) {
            deviceWide.publish(currentSequence);
            if (publishAtFree) {
                deviceFence.wake();
            } else { // a test's fence on the calling thread
                deviceFence.request(); // synchronises here
                return deviceWide.covered();
            }
        }
        return covered;
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
