package dev.vmmkit.interpose;

import dev.vmmkit.tools.trace.TraceWriter;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;

/**
 * Records the program's requests for {@code vmmkit run --trace} through {@link TraceWriter}, in the
 * format {@code vmmkit replay} reads. A cudaFree ({@link InterposedCalls#DEVICE_WIDE_STREAM}) is
 * written with stream 0, the legacy default stream. A write error stops tracing with one warning;
 * the program keeps running.
 */
final class TraceFileRecorder implements AllocationRecorder {
    private final Path path;
    private final TraceWriter writer;
    private volatile boolean failed;

    TraceFileRecorder(Path path, String mode) throws IOException {
        this.path = path;
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
        return stream == InterposedCalls.DEVICE_WIDE_STREAM ? 0 : stream;
    }

    private void stop(Exception e) {
        failed = true;
        InterposeLog.warnOnce("trace", "cannot write the trace " + path + "; tracing stops", e);
    }
}
