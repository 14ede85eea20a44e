package dev.vmmkit.driver;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * Times the driver calls made through it. While it is {@linkplain #arm armed} it keeps each call, on
 * every thread, so a caller can tell how long one operation spent in the driver and how long around
 * it: the breakdowns of a first large allocation, pause and resume that {@code VMM_LOG=info} prints.
 * Operations are timed one at a time; the calls of all of them stay kept, an operation's being those
 * between {@link #kept} before and after it (at most {@value #MOST_CALLS} in all). It also adds up
 * every call's time by kind ({@link #totals}), for a replay's account of where its time went. A call
 * costs two clock reads and an atomic add more.
 */
public final class TimingDriver extends ForwardingDriver {
    /** Calls kept at most: a 40 GiB kept tag's pause and resume make about 1,000 (one copy per 256 MiB, each awaited). */
    static final int MOST_CALLS = 4096;

    /** One call: what, on which thread (the armed one or another), when (System.nanoTime), how many bytes. */
    public record Call(DriverCall call, boolean otherThread, long startNanos, long endNanos, long bytes) {
        public long nanos() {
            return endNanos - startNanos;
        }
    }

    private final StreamEvents events = new TimedEvents();
    private volatile Thread armedBy;
    // Guarded by this object's monitor. Plain arrays: keeping a call loads no class and allocates nothing.
    private final DriverCall[] kinds = new DriverCall[MOST_CALLS];
    private final boolean[] others = new boolean[MOST_CALLS];
    private final long[] starts = new long[MOST_CALLS];
    private final long[] ends = new long[MOST_CALLS];
    private final long[] sizes = new long[MOST_CALLS];
    private int count;
    private final AtomicLongArray totalNanos = new AtomicLongArray(DriverCall.values().length);
    private final AtomicLongArray totalCalls = new AtomicLongArray(DriverCall.values().length);

    public TimingDriver(VmmDriver delegate) {
        super(delegate);
    }

    /** Sets the totals back to zero. */
    public void resetTotals() {
        for (int i = 0; i < totalNanos.length(); i++) {
            totalNanos.set(i, 0);
            totalCalls.set(i, 0);
        }
    }

    /**
     * The time spent in each kind of call since the last {@link #resetTotals}, longest first, as
     * "set_access 156 calls 35.1 ms | unmap ...", and the sum; empty when no call was made.
     */
    public String totals() {
        java.util.List<DriverCall> kinds = new java.util.ArrayList<>();
        long sum = 0;
        for (DriverCall c : DriverCall.values()) {
            if (totalCalls.get(c.ordinal()) == 0) continue;
            kinds.add(c);
            sum += totalNanos.get(c.ordinal());
        }
        kinds.sort((a, b) -> Long.compare(totalNanos.get(b.ordinal()), totalNanos.get(a.ordinal())));
        StringBuilder line = new StringBuilder();
        for (DriverCall c : kinds) {
            line.append(line.isEmpty() ? "" : " | ").append(c.key()).append(' ').append(totalCalls.get(c.ordinal()))
                    .append(" calls ").append(millis(totalNanos.get(c.ordinal()))).append(" ms");
        }
        return line.isEmpty() ? "" : millis(sum) + " ms in the driver: " + line;
    }

    private static String millis(long nanos) {
        return String.format(java.util.Locale.ROOT, "%.2f", nanos / 1e6);
    }

    /**
     * Starts keeping calls, from every thread; the calling thread's are the operation's own. Calls
     * kept earlier stay: an operation's are those from {@link #kept} before its arm to {@link #kept}
     * after its disarm.
     */
    public synchronized void arm() {
        armedBy = Thread.currentThread();
    }

    /** Stops keeping calls; cheap (no allocation), so it may end the operation it timed. */
    public void disarm() {
        armedBy = null;
    }

    /** True when no more calls can be kept: those made later are not in {@link #calls}. */
    public synchronized boolean isFull() {
        return count == MOST_CALLS;
    }

    /** How many calls are kept so far (at most {@value #MOST_CALLS}). */
    public synchronized int kept() {
        return count;
    }

    /** The calls kept at positions {@code from} (inclusive) to {@code to}, in the order they started. */
    public synchronized List<Call> calls(int from, int to) {
        List<Call> kept = new ArrayList<>(Math.max(0, to - from));
        for (int i = Math.max(0, from); i < Math.min(to, count); i++) {
            kept.add(new Call(kinds[i], others[i], starts[i], ends[i], sizes[i]));
        }
        kept.sort((a, b) -> Long.compare(a.startNanos, b.startNanos));
        return kept;
    }

    private void timed(DriverCall call, long start, long bytes) {
        long end = System.nanoTime();
        totalNanos.addAndGet(call.ordinal(), end - start);
        totalCalls.incrementAndGet(call.ordinal());
        Thread armed = armedBy;
        if (armed == null) return;
        synchronized (this) {
            if (armedBy == null || count == MOST_CALLS) return;
            kinds[count] = call;
            others[count] = Thread.currentThread() != armed;
            starts[count] = start;
            ends[count] = end;
            sizes[count] = bytes;
            count++;
        }
    }

    private static long start() {
        return System.nanoTime();
    }

    @Override
    public long reserve(long size, long alignment) {
        long t = start();
        try {
            return delegate.reserve(size, alignment);
        } finally {
            timed(DriverCall.RESERVE, t, size);
        }
    }

    @Override
    public void addressFree(long va, long size) {
        long t = start();
        try {
            delegate.addressFree(va, size);
        } finally {
            timed(DriverCall.ADDRESS_FREE, t, size);
        }
    }

    @Override
    public long create(long size, boolean exportable) {
        long t = start();
        try {
            return delegate.create(size, exportable);
        } finally {
            timed(DriverCall.CREATE, t, size);
        }
    }

    @Override
    public void release(long handle) {
        long t = start();
        try {
            delegate.release(handle);
        } finally {
            timed(DriverCall.RELEASE, t, 0);
        }
    }

    @Override
    public void map(long va, long size, long handle) {
        long t = start();
        try {
            delegate.map(va, size, handle);
        } finally {
            timed(DriverCall.MAP, t, size);
        }
    }

    @Override
    public void setAccess(long va, long size) {
        long t = start();
        try {
            delegate.setAccess(va, size);
        } finally {
            timed(DriverCall.SET_ACCESS, t, size);
        }
    }

    @Override
    public void setAccess(long va, long size, long grant, long revoke) {
        long t = start();
        try {
            delegate.setAccess(va, size, grant, revoke);
        } finally {
            timed(DriverCall.SET_ACCESS, t, size);
        }
    }

    @Override
    public void unmap(long va, long size) {
        long t = start();
        try {
            delegate.unmap(va, size);
        } finally {
            timed(DriverCall.UNMAP, t, size);
        }
    }

    @Override
    public MemoryInfo memoryInfo() {
        long t = start();
        try {
            return delegate.memoryInfo();
        } finally {
            timed(DriverCall.MEMORY_INFO, t, 0);
        }
    }

    @Override
    public StreamEvents events() {
        return events;
    }

    /** Times event calls, then forwards them to the delegate's events. */
    private final class TimedEvents implements StreamEvents {
        @Override
        public void prepareThread() {
            delegate.events().prepareThread(); // no device work: not counted, timed or failed
        }

        @Override
        public long create() {
            long t = start();
            try {
                return delegate.events().create();
            } finally {
                timed(DriverCall.EVENT_CREATE, t, 0);
            }
        }

        @Override
        public void record(long event, long stream) {
            long t = start();
            try {
                delegate.events().record(event, stream);
            } finally {
                timed(DriverCall.EVENT_RECORD, t, 0);
            }
        }

        @Override
        public boolean isComplete(long event) {
            long t = start();
            try {
                return delegate.events().isComplete(event);
            } finally {
                timed(DriverCall.EVENT_QUERY, t, 0);
            }
        }

        @Override
        public void synchronize(long event) {
            long t = start();
            try {
                delegate.events().synchronize(event);
            } finally {
                timed(DriverCall.EVENT_SYNCHRONIZE, t, 0);
            }
        }

        @Override
        public void destroy(long event) {
            long t = start();
            try {
                delegate.events().destroy(event);
            } finally {
                timed(DriverCall.EVENT_DESTROY, t, 0);
            }
        }

        @Override
        public void synchronizeDevice() {
            long t = start();
            try {
                delegate.events().synchronizeDevice();
            } finally {
                timed(DriverCall.DEVICE_SYNCHRONIZE, t, 0);
            }
        }
    }
}
