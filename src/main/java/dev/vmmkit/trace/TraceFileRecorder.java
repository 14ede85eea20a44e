package dev.vmmkit.trace;

import dev.vmmkit.core.DeviceMemoryResource;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.function.BiConsumer;

/**
 * Records requests into a trace file through {@link TraceWriter}, in the format {@code vmmkit replay}
 * reads. A cudaFree ({@link DeviceMemoryResource#DEVICE_WIDE_STREAM}) is written with stream 0, the
 * legacy default stream. A write error stops recording and is reported once to {@code onFailure}
 * (the message and the cause); the program keeps running.
 */
public final class TraceFileRecorder implements AllocationRecorder {
    private final Path path;
    private final TraceWriter writer;
    private final BiConsumer<String, Exception> onFailure;
    private volatile boolean failed;

    /** A recorder whose write failures are printed on stderr. */
    public TraceFileRecorder(Path path, String mode) throws IOException {
        this(path, mode, (message, cause) -> System.err.println("vmmkit: " + message + ": " + cause));
    }

    public TraceFileRecorder(Path path, String mode, BiConsumer<String, Exception> onFailure) throws IOException {
        this.path = path;
        this.onFailure = onFailure;
        this.writer = TraceWriter.open(path, "vmmkit run, mode=" + mode);
    }

    @Override
    public boolean isRecording() {
        return !failed;
    }

    @Override
    public void allocated(long address, long size, long stream) {
        if (failed) return;
        try {
            writer.alloc(address, size, traceStream(stream));
        } catch (IOException | RuntimeException e) {
            stop(e);
        }
    }

    @Override
    public void freed(long address, long size, long stream) {
        if (failed || size < 0) return;
        try {
            writer.free(address, size, traceStream(stream));
        } catch (IOException | RuntimeException e) {
            stop(e);
        }
    }

    @Override
    public void close() {
        try {
            writer.close();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static long traceStream(long stream) {
        return stream == DeviceMemoryResource.DEVICE_WIDE_STREAM ? 0 : stream;
    }

    private void stop(Exception e) {
        failed = true;
        onFailure.accept("cannot write the trace " + path + "; tracing stops", e);
    }
}
