package dev.vmmkit.engine;

import java.io.IOException;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * Writes the frames of a worker's live streams (each token, then the answer) to the host from a
 * thread of its own, so the engine's decoding thread never makes the write itself.
 *
 * <p>Why: a write to the channel wakes the host's reader, and the scheduler likes to run a woken
 * thread on (or beside) the core of the thread that woke it. Made on the decoding thread, every
 * token's write put the host's work next to the engine's, and the engine's next llama_decode
 * (its CPU share of each token, on the critical path) ran up to twice as long in the slow
 * requests. Here the decoding thread only queues the bytes; this thread wakes every
 * {@link #POLL_NANOS} while a stream is open and writes what it finds, so nothing the decoding
 * thread does wakes anyone. A stream's first frame waits at most one poll (plus the kernel's
 * timer slack); between streams the thread parks until the next {@link #open}.
 */
final class StreamWriter implements AutoCloseable {
    /** How often the thread looks for frames while a stream is open (a token is a millisecond or more on a GPU). */
    static final long POLL_NANOS = 20_000;

    private final WorkerChannel channel;
    private final ConcurrentLinkedQueue<WorkerChannel.Frames> queue = new ConcurrentLinkedQueue<>();
    private final AtomicInteger openStreams = new AtomicInteger();
    private final Thread thread;
    private volatile boolean closed;

    StreamWriter(WorkerChannel channel) {
        this.channel = channel;
        this.thread = Thread.ofPlatform().daemon().name("engine-stream-writer").start(this::run);
    }

    /** A stream begins: the thread polls from now until every open stream has {@link #close closed}. */
    void open() {
        openStreams.incrementAndGet();
        LockSupport.unpark(thread);
    }

    /** Queues frames to go out after those queued before them; never waits. */
    void send(WorkerChannel.Frames frames) {
        queue.add(frames);
    }

    /** A stream ended; its last frames were {@link #send sent} before: they go out at once. */
    void end() {
        openStreams.decrementAndGet();
        LockSupport.unpark(thread); // the answer is not worth a poll's wait, and no token is decoding now
    }

    @Override
    public void close() {
        closed = true;
        LockSupport.unpark(thread);
    }

    private void run() {
        while (!closed) {
            // Read before draining: a stream's end() follows its last send(), so a drain after
            // seeing no stream open finds every frame of the streams that closed.
            boolean streaming = openStreams.get() > 0;
            WorkerChannel.Frames frames;
            while ((frames = queue.poll()) != null) {
                try {
                    channel.send(frames);
                } catch (IOException e) {
                    Runtime.getRuntime().halt(72); // the host is gone
                }
            }
            if (streaming) LockSupport.parkNanos(POLL_NANOS);
            else LockSupport.park();
        }
    }
}
