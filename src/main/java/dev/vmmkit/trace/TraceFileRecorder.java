package dev.vmmkit.trace;

import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.core.DeviceWideFreeClock;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.function.BiConsumer;

/**
 * Records requests into a trace file through {@link TraceWriter}, in the format {@code vmmkit replay}
 * reads. A cudaFree ({@link #cudaFreeRequested}) is written on
 * {@link DeviceMemoryResource#DEVICE_WIDE_STREAM} (unsigned, 18446744073709551615): its
 * {@code free_requested} when the program frees, its {@code free_completed} once the resource's
 * {@link DeviceWideFreeClock} says the device finished the work before it, written before the next
 * request made after that (read as the request begins), or at close, so that a replay sees the
 * memory come back when the program's allocator did. A cudaFree whose memory is reusable at once
 * ({@link #freed} on that stream) is written on stream 0, both lines together. A request that gave
 * up waiting for such frees gets a {@code wait_gave_up} line after its {@code alloc}. A write error stops
 * recording and is reported once to {@code onFailure} (the message and the cause); the program
 * keeps running.
 *
 * <p>Thread-safe: each request is written, with the completions before it, under this recorder's lock.
 */
public final class TraceFileRecorder implements AllocationRecorder {
    private final Path path;
    private final TraceWriter writer;
    private final BiConsumer<String, Exception> onFailure;
    private volatile boolean failed;
    private final PendingDeviceWideFrees pending = new PendingDeviceWideFrees();

    /** A recorder whose write failures are printed on stderr. */
    public TraceFileRecorder(Path path, String mode) throws IOException {
        this(path, mode, (message, cause) -> System.err.println("vmmkit: " + message + ": " + cause));
    }

    public TraceFileRecorder(Path path, String mode, BiConsumer<String, Exception> onFailure) throws IOException {
        this(path, TraceWriter.open(path, "vmmkit run, mode=" + mode), onFailure);
    }

    /** A recorder into {@code writer}, which it closes; {@code name} names it in messages (tests). */
    TraceFileRecorder(TraceWriter writer, String name) {
        this(Path.of(name), writer, (message, cause) -> { throw new IllegalStateException(message, cause); });
    }

    private TraceFileRecorder(Path path, TraceWriter writer, BiConsumer<String, Exception> onFailure) {
        this.path = path;
        this.onFailure = onFailure;
        this.writer = writer;
    }

    @Override
    public boolean isRecording() {
        return !failed;
    }

    @Override
    public synchronized void beforeAllocation() {
        if (failed) return;
        try {
            writeCompletions(false);
        } catch (IOException | RuntimeException e) {
            stop(e);
        }
    }

    /**
     * Written without the completions that came while it was made: a wait inside it for the
     * device brought them back, and a replay must make that wait too ({@link #beforeAllocation}).
     */
    @Override
    public synchronized void allocated(long address, long size, long stream) {
        if (failed) return;
        try {
            writer.alloc(address, size, traceStream(stream));
        } catch (IOException | RuntimeException e) {
            stop(e);
        }
    }

    /** Written as {@link #allocated}, with a {@code wait_gave_up} line for it right after. */
    @Override
    public synchronized void allocatedAfterGivingUpWaiting(long address, long size, long stream) {
        if (failed) return;
        try {
            writer.alloc(address, size, traceStream(stream));
            writer.waitGaveUp(address, size, traceStream(stream));
        } catch (IOException | RuntimeException e) {
            stop(e);
        }
    }

    @Override
    public synchronized void freed(long address, long size, long stream) {
        if (failed || size < 0) return;
        try {
            writeCompletions(false);
            writer.free(address, size, traceStream(stream));
        } catch (IOException | RuntimeException e) {
            stop(e);
        }
    }

    @Override
    public synchronized void cudaFreeRequested(long address, long size) {
        if (failed || size < 0) return;
        try {
            writeCompletions(false);
            writer.freeRequested(address, size, DeviceMemoryResource.DEVICE_WIDE_STREAM);
            pending.requested(address, size);
        } catch (IOException | RuntimeException e) {
            stop(e);
        }
    }

    @Override
    public synchronized void cudaFreeReturned(long address, DeviceWideFreeClock clock) {
        pending.returned(address, clock, clock.markAfterFree(address));
    }

    /** Writes the completion of every waiting cudaFree (the program has ended: its device is done). */
    @Override
    public synchronized void close() {
        try {
            if (!failed) writeCompletions(true);
            writer.close();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** A request's stream in the trace: a cudaFree reusable at once, and its cudaMalloc, on stream 0. */
    private static long traceStream(long stream) {
        return stream == DeviceMemoryResource.DEVICE_WIDE_STREAM ? 0 : stream;
    }

    /** The completions of the oldest waiting cudaFrees whose memory is back ({@code all}: every one). */
    private void writeCompletions(boolean all) throws IOException {
        while (all ? pending.size() > 0 : pending.oldestCovered()) {
            writer.freeCompleted(pending.oldestAddress(), pending.oldestSize(), DeviceMemoryResource.DEVICE_WIDE_STREAM);
            pending.removeOldest();
        }
    }

    private void stop(Exception e) {
        failed = true;
        onFailure.accept("cannot write the trace " + path + "; tracing stops", e);
    }
}
