package dev.vmmkit.driver.host;

import dev.vmmkit.driver.CallText;
import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.StreamEvents;
import org.agrona.collections.Long2ObjectHashMap;

/**
 * Events of the host driver. Host work is synchronous, so by default an event is complete as soon
 * as it is recorded. To test stream-ordered code, a test can {@linkplain #holdCompletion hold}
 * events open (as if the device were still busy) and complete them later, all at once or by stream.
 *
 * <p>{@link #synchronize} on a held event completes it, as the host waiting for the device would,
 * and counts as a {@linkplain #waitCount() wait}; {@link #synchronizeDevice} does the same for
 * every held event at once (one wait, none when nothing is held). Unknown or destroyed events are
 * {@code CUDA_ERROR_INVALID_HANDLE}; an event never recorded is complete (as cuEventQuery says).
 */
public final class HostEvents implements StreamEvents {
    private final HostDriver owner;
    private final Object lock = new Object();
    private final Long2ObjectHashMap<EventState> events = new Long2ObjectHashMap<>();
    private long nextEvent = 1;
    private boolean holding;
    private int pending;
    private long waits;

    HostEvents(HostDriver owner) {
        this.owner = owner;
    }

    @Override
    public long create() {
        synchronized (lock) {
            owner.requireOpen(CallText.eventCreate());
            long event = nextEvent++;
            events.put(event, new EventState());
            return event;
        }
    }

    @Override
    public void record(long event, long stream) {
        synchronized (lock) {
            EventState state = known(event, CallText.eventRecord(event, stream));
            // Re-recording replaces the earlier mark, as cuEventRecord does.
            setPending(state, holding);
            state.stream = stream;
        }
    }

    @Override
    public boolean isComplete(long event) {
        synchronized (lock) {
            return !known(event, CallText.eventQuery(event)).pending;
        }
    }

    @Override
    public void synchronize(long event) {
        synchronized (lock) {
            EventState state = known(event, CallText.eventSynchronize(event));
            if (state.pending) {
                setPending(state, false);
                waits++;
            }
        }
    }

    @Override
    public void destroy(long event) {
        synchronized (lock) {
            EventState state = known(event, CallText.eventDestroy(event));
            setPending(state, false);
            events.remove(event);
        }
    }

    @Override
    public void synchronizeDevice() {
        synchronized (lock) {
            owner.requireOpen(CallText.deviceSynchronize());
            if (pending > 0) {
                completeAllHeld();
                waits++;
            }
        }
    }

    /**
     * While {@code hold} is true, events recorded from now on stay incomplete until completed by
     * {@link #completeAll}, {@link #completeStream} or {@link #synchronize}. Turning it off leaves
     * already-held events pending.
     */
    public void holdCompletion(boolean hold) {
        synchronized (lock) {
            holding = hold;
        }
    }

    /** Completes every pending event; returns how many there were. */
    public int completeAll() {
        synchronized (lock) {
            return completeAllHeld();
        }
    }

    /** Completes the pending events last recorded on {@code stream}; returns how many. */
    public int completeStream(long stream) {
        synchronized (lock) {
            int before = pending;
            events.forEach((event, state) -> {
                if (state.pending && state.stream == stream) {
                    setPending(state, false);
                }
            });
            return before - pending;
        }
    }

    /** Events recorded and not yet complete. */
    public int pendingCount() {
        synchronized (lock) {
            return pending;
        }
    }

    /**
     * How many {@link #synchronize} calls found their event pending, and {@link #synchronizeDevice}
     * calls found any event pending, and so had to "wait".
     */
    public long waitCount() {
        synchronized (lock) {
            return waits;
        }
    }

    /** Called by {@link HostDriver#close()}: every event is gone. */
    void clear() {
        synchronized (lock) {
            events.clear();
            pending = 0;
        }
    }

    private int completeAllHeld() {
        int completed = pending;
        events.forEach((event, state) -> state.pending = false);
        pending = 0;
        return completed;
    }

    private EventState known(long event, String call) {
        owner.requireOpen(call);
        EventState state = events.get(event);
        if (state == null) {
            throw new DriverException(CudaResult.INVALID_HANDLE,
                    CudaResult.describe(CudaResult.INVALID_HANDLE) + ": unknown or destroyed event", call);
        }
        return state;
    }

    private void setPending(EventState state, boolean pendingNow) {
        if (state.pending != pendingNow) {
            pending += pendingNow ? 1 : -1;
            state.pending = pendingNow;
        }
    }

    private static final class EventState {
        long stream;
        boolean pending;
    }
}
