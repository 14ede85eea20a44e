package dev.vmmkit.engine;

import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;

/**
 * The host's side of one engine worker: starts the process, sends calls and pairs answers with
 * them by call number, and notices the worker's end: its channel closing or carrying garbage, its
 * exit, or a call that outran the timeout (then the host ends it). Every call in flight then fails
 * with what happened, named: the exit status or signal, and for a JVM that caught a fault in
 * native code, the signal from its error report.
 *
 * <p>Who reads the channel: one thread at a time, whoever holds {@code reading}. A caller that
 * finds nobody reading reads its own answer (and hands on any other call's frames it meets), so
 * the thread that waits is the one the kernel wakes: no second thread to wake. A watcher thread
 * per worker reads the rest of the time: when a call waits with nobody reading, when the worker
 * exited, and once the channel had no call for {@link #QUIET_NANOS}, so a worker that ends,
 * closes its channel or writes garbage between calls is noticed then. It also ends the worker of
 * a call that runs past its timeout while its caller reads.
 */
final class WorkerProcess implements AutoCloseable {
    /** What ended a worker, in words, and whether the host ended it for running too long. */
    record Death(String cause, boolean timedOut) {
    }

    /** One answer: DONE or FAILED, and its payload. */
    record Answer(int type, DataInputStream payload) {
    }

    /** A call that failed because the worker ended; its message names the cause. */
    static final class WorkerDied extends Exception {
        final Death death;

        WorkerDied(Death death) {
            super(death.cause());
            this.death = death;
        }
    }

    /** How long a worker's JVM may take to start; it is not a call, so the request timeout does not apply. */
    static final Duration START_TIMEOUT = Duration.ofSeconds(120);
    private static final AtomicInteger WORKERS = new AtomicInteger();
    /** How long a worker whose channel ended may take to exit before it counts as having closed it on purpose. */
    private static final long CLOSED_CHANNEL_GRACE_SECONDS = 5;
    /**
     * While a call is out, the reader and the caller spin this long for the answer before they
     * block: two kernel wake-ups less per call, which is most of what a worker costs over a call in
     * the host's own process. Only where there are cores to spare; a short call is the common case
     * and a long one (a GPU generation) blocks after the spin.
     */
    static final long ANSWER_SPIN_NANOS = Runtime.getRuntime().availableProcessors() >= 4 ? 100_000 : 0;

    private final Process process;
    private final WorkerChannel channel;
    private final String name;
    private final Path errorFile;
    /**
     * How long the channel has had no call before the watcher reads it (and blocks there until
     * the next frame): calls closer together than this read their own answers.
     */
    static final long QUIET_NANOS = 50_000_000;

    /** A call waiting for its answer, and until when it may run (System.nanoTime). */
    private record Pending(CompletableFuture<Answer> answer, String what, Duration timeout, long deadline) {
    }

    private final ConcurrentHashMap<Integer, Pending> pending = new ConcurrentHashMap<>();
    /** Held by the one thread that reads the channel. */
    private final ReentrantLock reading = new ReentrantLock();
    /** A caller holds {@link #reading}: the watcher leaves the channel to it. */
    private volatile boolean callerReading;
    /** When the last call started (System.nanoTime). */
    private volatile long lastCallStart = System.nanoTime();
    /** The channel ended (closed or garbage) and every call in flight was failed. */
    private volatile boolean channelEnded;
    /** The host closed its ends of the channel: nothing more is read; the worker's exit settles its death. */
    private volatile boolean hostClosed;
    private final Thread watcher;
    private final ConcurrentHashMap<Integer, Generation.Sink> streams = new ConcurrentHashMap<>();
    private final AtomicInteger calls = new AtomicInteger();
    private final CompletableFuture<Death> death = new CompletableFuture<>();
    private final CompletableFuture<Long> ready = new CompletableFuture<>();
    private volatile String endingReason;
    private final Consumer<Death> onDeath;

    private WorkerProcess(Process process, String name, Path errorFile, Consumer<Death> onDeath) {
        this.process = process;
        this.onDeath = onDeath;
        this.name = name;
        this.errorFile = errorFile;
        this.channel = new WorkerChannel(process.getInputStream(), process.getOutputStream());
        this.watcher = Thread.ofPlatform().daemon().name("engine-worker-watch-" + process.pid()).start(this::watch);
        process.onExit().thenRun(() -> LockSupport.unpark(watcher));
    }

    /**
     * Starts a worker and waits for its first frame.
     *
     * @param privateDir where the JVM's error report goes if the worker crashes
     * @param driverKind the host's driver kind, which the shim in the worker is told
     * @param onDeath    told once when the worker ends, whatever the reason
     * @throws WorkerDied when the worker ended before it was ready, or did not get ready within {@code timeout}
     */
    static WorkerProcess start(String name, Path privateDir, String driverKind, Duration timeout, Consumer<Death> onDeath)
            throws IOException, WorkerDied {
        Path errorFile = privateDir.resolve("worker-" + WORKERS.incrementAndGet() + "-hs_err.log");
        ProcessBuilder builder = new ProcessBuilder(WorkerCommand.java(errorFile));
        WorkerCommand.environment(builder.environment(), driverKind);
        return start(builder, name, errorFile, timeout, onDeath);
    }

    /** Starts {@code command} as a worker (tests start programs that break the framing). */
    static WorkerProcess start(List<String> command, String name, Path errorFile, Duration timeout, Consumer<Death> onDeath)
            throws IOException, WorkerDied {
        return start(new ProcessBuilder(command), name, errorFile, timeout, onDeath);
    }

    private static WorkerProcess start(ProcessBuilder builder, String name, Path errorFile, Duration timeout, Consumer<Death> onDeath)
            throws IOException, WorkerDied {
        builder.redirectError(ProcessBuilder.Redirect.INHERIT);
        long started = System.nanoTime();
        WorkerProcess worker = new WorkerProcess(builder.start(), name, errorFile, onDeath);
        worker.awaitReady(timeout);
        EngineHost.LOGGER.log(System.Logger.Level.INFO, "engine worker for " + name + " (pid " + worker.pid() + ") ready in "
                + (System.nanoTime() - started) / 1_000_000 + " ms");
        return worker;
    }

    long pid() {
        return process.pid();
    }

    boolean alive() {
        return !death.isDone();
    }

    /**
     * Sends one call and waits for its answer.
     *
     * @param what    the ABI function it runs, for messages
     * @param timeout how long the call may take before the host ends the worker
     * @throws WorkerDied when the worker ended before it answered (the host ended it on timeout)
     */
    Answer call(int type, String what, WorkerChannel.Payload payload, Duration timeout) throws WorkerDied {
        return call(type, what, payload, timeout, null);
    }

    /**
     * A call whose TOKEN frames go to {@code tokens} (on the reader thread) before its answer. When
     * the sink returns false the worker is sent a CANCEL for the call, and its later tokens are dropped.
     */
    Answer call(int type, String what, WorkerChannel.Payload payload, Duration timeout, Generation.Sink tokens)
            throws WorkerDied {
        int call = calls.incrementAndGet();
        CompletableFuture<Answer> answer = new CompletableFuture<>();
        pending.put(call, new Pending(answer, what, timeout, System.nanoTime() + timeout.toNanos()));
        if (tokens != null) streams.put(call, tokens);
        lastCallStart = System.nanoTime();
        try {
            if (death.isDone()) throw new WorkerDied(death.join());
            try {
                channel.write(type, call, payload);
            } catch (IOException e) {
                throw new WorkerDied(awaitDeath("its channel failed while sending " + what + ": " + e.getMessage()));
            }
            if (reading.tryLock()) {
                try {
                    readUntilAnswered(answer);
                } finally {
                    reading.unlock();
                }
                if (unanswered()) LockSupport.unpark(watcher); // calls left with nobody reading
            } else {
                long spinUntil = System.nanoTime() + ANSWER_SPIN_NANOS;
                while (!answer.isDone() && System.nanoTime() - spinUntil < 0) Thread.onSpinWait();
            }
            try {
                return answer.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
            } catch (TimeoutException e) {
                endingReason = overtime(what, timeout);
                process.destroyForcibly();
                throw new WorkerDied(death.join());
            } catch (ExecutionException e) {
                if (e.getCause() instanceof WorkerDied died) throw died;
                throw new IllegalStateException(e.getCause());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted waiting for " + what);
            }
        } finally {
            pending.remove(call);
            streams.remove(call);
        }
    }

    private static String overtime(String what, Duration timeout) {
        return what + " ran longer than the request timeout of " + timeout.toMillis() + " ms";
    }

    /** The caller reads frames (its own answer, and any other call's) until its answer came or the channel ended. */
    private void readUntilAnswered(CompletableFuture<Answer> answer) {
        callerReading = true;
        try {
            while (!answer.isDone() && !channelEnded) {
                if (ANSWER_SPIN_NANOS > 0) channel.spinUntilReadable(ANSWER_SPIN_NANOS);
                dispatch(channel.read());
            }
        } catch (IOException e) {
            channelEnded(e);
        } finally {
            callerReading = false;
        }
    }

    /** Some call still waits for its answer. */
    private boolean unanswered() {
        for (Pending call : pending.values()) {
            if (!call.answer().isDone()) return true;
        }
        return false;
    }

    /** Hands a TOKEN frame to its call's sink; a sink that says stop gets its call cancelled once. */
    private void token(WorkerChannel.Frame frame) throws IOException {
        if (!pending.containsKey(frame.call())) throw new WorkerChannel.GarbageException("a token for call " + frame.call() + ", which nobody made");
        Generation.Token token = WorkerChannel.readToken(frame.payload());
        Generation.Sink sink = streams.get(frame.call());
        if (sink == null) return; // cancelled already: the worker stops at its next token
        boolean more;
        try {
            more = sink.accept(token);
        } catch (RuntimeException e) {
            EngineHost.LOGGER.log(System.Logger.Level.ERROR, name + ": a token's receiver failed", e);
            more = false;
        }
        if (!more) {
            streams.remove(frame.call());
            channel.write(WorkerChannel.CANCEL, frame.call(), null);
        }
    }

    /** Ends the worker at once (no shutdown call) and waits for its exit. */
    void kill(String why) {
        if (endingReason == null) endingReason = why;
        process.destroyForcibly();
        death.join();
    }

    /** Closes the channel (the worker exits on its end) and waits for the exit. */
    @Override
    public void close() {
        if (endingReason == null) endingReason = "closed by the host";
        hostClosed = true;
        channel.close();
        try {
            if (!process.waitFor(10, TimeUnit.SECONDS)) process.destroyForcibly();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            process.destroyForcibly();
        }
        death.join();
    }

    private void awaitReady(Duration timeout) throws WorkerDied {
        try {
            ready.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            endingReason = "it did not start within " + timeout.toMillis() + " ms";
            process.destroyForcibly();
            throw new WorkerDied(death.join());
        } catch (ExecutionException e) {
            throw new WorkerDied(death.join());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            process.destroyForcibly();
            throw new WorkerDied(death.join());
        }
    }

    /**
     * The watcher: reads the first frame, then the channel whenever no caller reads it and one of
     * these holds: a call waits for its answer, the worker exited, or the channel had no call for
     * {@link #QUIET_NANOS}. Otherwise it ends calls that ran past their timeout, and waits.
     */
    private void watch() {
        try {
            WorkerChannel.Frame first;
            reading.lock();
            try {
                first = channel.read();
            } finally {
                reading.unlock();
            }
            if (first.type() != WorkerChannel.READY) throw new WorkerChannel.GarbageException("frame type " + first.type() + " before READY");
            ready.complete(first.payload().readLong());
        } catch (IOException e) {
            channelEnded(e);
            return;
        }
        while (!channelEnded) {
            if (hostClosed) {
                if (!process.isAlive()) {
                    channelEnded(new EOFException("closed by the host"));
                    return;
                }
                LockSupport.parkNanos(this, QUIET_NANOS); // woken by the exit
                continue;
            }
            long quietFor = System.nanoTime() - lastCallStart;
            boolean unanswered = unanswered();
            if (!callerReading && (unanswered || quietFor >= QUIET_NANOS || !process.isAlive()) && reading.tryLock()) {
                try {
                    if (channelEnded) return;
                    if (ANSWER_SPIN_NANOS > 0 && unanswered) channel.spinUntilReadable(ANSWER_SPIN_NANOS);
                    dispatch(channel.read());
                } catch (IOException e) {
                    channelEnded(e);
                    return;
                } finally {
                    reading.unlock();
                }
                continue;
            }
            long wait = endOverdueCalls();
            if (quietFor < QUIET_NANOS) wait = Math.min(wait, QUIET_NANOS - quietFor);
            LockSupport.parkNanos(this, wait);
        }
    }

    /** Ends the worker when a call ran past its timeout; returns the nanoseconds to the next deadline (at most {@link #QUIET_NANOS}). */
    private long endOverdueCalls() {
        long now = System.nanoTime();
        long next = QUIET_NANOS;
        for (Pending call : pending.values()) {
            if (call.answer().isDone()) continue;
            long left = call.deadline() - now;
            if (left <= 0) {
                if (endingReason == null) endingReason = overtime(call.what(), call.timeout());
                process.destroyForcibly(); // the caller reading the channel meets its end
            } else {
                next = Math.min(next, left);
            }
        }
        return next;
    }

    /** Hands one frame to its call: a token to its sink, an answer to its caller. */
    private void dispatch(WorkerChannel.Frame frame) throws IOException {
        if (frame.type() == WorkerChannel.TOKEN) {
            token(frame);
            return;
        }
        if (frame.type() != WorkerChannel.DONE && frame.type() != WorkerChannel.FAILED) {
            throw new WorkerChannel.GarbageException("unknown frame type " + frame.type());
        }
        Pending waiting = pending.get(frame.call());
        if (waiting == null) throw new WorkerChannel.GarbageException("an answer to call " + frame.call() + ", which nobody made");
        waiting.answer().complete(new Answer(frame.type(), frame.payload()));
    }

    /** The channel closed or carried garbage: settles the death and fails every call in flight. */
    private void channelEnded(IOException e) {
        // a read after the host closed its end fails for that, not for anything the worker wrote
        String broken = WorkerChannel.closed(e) || hostClosed ? null : "it wrote garbage on its channel (" + e.getMessage() + ")";
        Death end = awaitDeath(broken);
        channelEnded = true;
        ready.completeExceptionally(new WorkerDied(end));
        for (Pending waiting : pending.values()) waiting.answer().completeExceptionally(new WorkerDied(end));
        LockSupport.unpark(watcher);
    }

    /** Ends the process if it still runs, waits for it, and settles what ended it (once). */
    private synchronized Death awaitDeath(String channelProblem) {
        if (death.isDone()) return death.join();
        if (channelProblem != null && endingReason == null) endingReason = channelProblem;
        if (channelProblem != null) process.destroyForcibly();
        channel.close();
        int status;
        try {
            // A worker that dies closes its channel as it exits; one whose channel ended but that
            // still runs seconds later closed it on purpose, and is ended like a crash.
            if (!process.waitFor(CLOSED_CHANNEL_GRACE_SECONDS, TimeUnit.SECONDS)) {
                if (endingReason == null) endingReason = "it closed its channel without exiting";
                process.destroyForcibly();
            }
            status = process.waitFor();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            process.destroyForcibly();
            status = -1;
        }
        String reason = endingReason;
        boolean timedOut = reason != null && reason.contains("request timeout");
        Death end = new Death(WorkerDeathCause.of("the worker of " + name + " (pid " + process.pid() + ")", reason, status, errorFile),
                timedOut);
        try {
            onDeath.accept(end); // before anyone waiting for the death sees it
        } catch (RuntimeException e) {
            EngineHost.LOGGER.log(System.Logger.Level.ERROR, "handling the end of a worker failed: " + e, e);
        }
        death.complete(end);
        return end;
    }
}
