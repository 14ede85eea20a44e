package dev.vmmkit.core;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.LongSupplier;

/**
 * Pins host memory for the next pause while a tag that keeps its contents is allocated, so that
 * even the first pause copies at the bus's speed rather than at the pinning speed (pinning 8 GiB
 * with cuMemHostAlloc takes seconds; copying it, a sixth of a second).
 *
 * <p>An allocation into such a tag calls {@link #wake} (one volatile read when off, a
 * compare-and-set when on). A thread of its own then compares what the running tags that keep
 * their contents would copy now ({@code need}) with the chunks ready ({@link PinnedChunks#readyBytes})
 * and pins the difference one chunk at a time (16 to 256 MiB), re-reading both after each chunk,
 * until it is covered or every byte of pinned host memory held for tags would pass the limit. A pause takes
 * the chunks ready, including one still being pinned, and pins whatever is missing itself, so it
 * never depends on this thread having finished. A failure to pin stops the round; the next
 * allocation tries again. Nothing is pinned while a CUDA stream capture is under way
 * ({@link StreamCaptures}): the round waits for its end.
 *
 * <p>Off (limit 0) unless {@link #limit} is set: {@code VMM_PIN_AHEAD}, see {@link PinAheadSetting}.
 */
final class PinAhead {
    /** The smallest chunk pinned ahead (the last may leave this much unused). */
    static final long MIN_CHUNK_BYTES = 16L << 20;
    private final PinnedChunks chunks;
    private final LongSupplier need;
    /** No chunk is pinned while a stream capture is under way. */
    private final StreamCaptures captures;
    private volatile long limitBytes;
    private final AtomicBoolean wanted = new AtomicBoolean();
    private final AtomicLong pinnedAhead = new AtomicLong();
    private final AtomicLong failures = new AtomicLong();
    private volatile boolean closed;
    private Thread thread;
    /** Rounds finished; guarded by this, which {@link #awaitIdle} waits on. */
    private boolean busy;

    PinAhead(PinnedChunks chunks, LongSupplier need, StreamCaptures captures) {
        this.chunks = chunks;
        this.need = need;
        this.captures = captures;
    }

    /** The most pinned host memory for tags that pinning ahead may reach; 0 turns it off. */
    void limit(long bytes) {
        if (bytes < 0) throw new IllegalArgumentException("pin-ahead limit must not be negative: " + bytes);
        limitBytes = bytes;
    }

    long limit() {
        return limitBytes;
    }

    /** A tag that keeps its contents grew: pin more in the background if needed. */
    void wake() {
        if (limitBytes == 0 || closed || wanted.get() || !wanted.compareAndSet(false, true)) return;
        LockSupport.unpark(thread());
    }

    /** Bytes pinned ahead so far, in all. */
    long pinnedAheadBytes() {
        return pinnedAhead.get();
    }

    /** Rounds that stopped because pinning failed. */
    long failures() {
        return failures.get();
    }

    /** Waits until no round is wanted or running (tests: the background work is done). */
    synchronized void awaitIdle() throws InterruptedException {
        while (!closed && (busy || wanted.get())) wait();
    }

    /** Stops the thread after the chunk it may be pinning (which the closed pool then frees). */
    void close() {
        closed = true;
        Thread t;
        synchronized (this) {
            t = thread;
            notifyAll();
        }
        if (t != null) LockSupport.unpark(t);
    }

    private synchronized Thread thread() {
        if (thread == null) {
            thread = new Thread(this::loop, "vmmkit-pin-ahead");
            thread.setDaemon(true);
            thread.start();
        }
        return thread;
    }

    private void loop() {
        while (!closed) {
            synchronized (this) {
                busy = wanted.getAndSet(false);
                if (!busy) notifyAll();
            }
            if (!busy) {
                LockSupport.park(this);
                continue;
            }
            try {
                pinWhatIsMissing();
            } catch (RuntimeException e) {
                failures.incrementAndGet();
            } finally {
                synchronized (this) {
                    busy = false;
                    notifyAll();
                }
            }
        }
    }

    private void pinWhatIsMissing() {
        while (!closed) {
            long limit = limitBytes;
            long missing = need.getAsLong() - chunks.readyBytes();
            if (missing <= 0) return;
            // At least MIN_CHUNK_BYTES: a model loaded tensor by tensor gets few chunks, not one per tensor.
            long room = (limit - chunks.pinnedBytes()) & -PinnedBackup.CHUNK_ALIGNMENT;
            long bytes = Math.min(room, PinnedBackup.roundToChunk(Math.min(PinnedBackup.CHUNK_BYTES, Math.max(missing, MIN_CHUNK_BYTES))));
            if (bytes <= 0) return;
            if (!captures.startUnlessCapturing()) {
                if (!captures.awaitNone(() -> closed)) return;
                continue;
            }
            try {
                chunks.pinAhead(bytes);
            } finally {
                captures.finished();
            }
            pinnedAhead.addAndGet(bytes);
        }
    }
}
