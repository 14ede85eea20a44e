package dev.vmmkit.interpose;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Writes requests in the trace format of {@code shared/traces/README.md}: lines
 * {@code action,addr,size,stream} after a {@code #} header. A free is written as
 * {@code free_requested} then {@code free_completed}: once cudaFree returns, the program may no
 * longer use the pointer. A cudaFree (no stream; {@link InterposedCalls#DEVICE_WIDE_STREAM}) is written
 * with stream 0, the legacy default stream, which orders after the work of all blocking streams.
 */
final class CsvTraceRecorder implements AllocationRecorder {
    private final Path path;
    private final BufferedWriter out;
    private boolean failed;

    CsvTraceRecorder(Path path, String mode) throws IOException {
        this.path = path;
        this.out = Files.newBufferedWriter(path);
        out.write("# action,addr,size,stream  (vmmkit run, mode=" + mode + ")\n");
    }

    @Override
    public boolean isRecording() {
        return true;
    }

    @Override
    public synchronized void allocated(long address, long size, long stream) {
        line("alloc", address, size, stream);
    }

    @Override
    public synchronized void freed(long address, long size, long stream) {
        line("free_requested", address, size, stream);
        line("free_completed", address, size, stream);
    }

    private void line(String action, long address, long size, long stream) {
        if (failed) return;
        try {
            out.write(action + ',' + address + ',' + size + ',' + (stream == InterposedCalls.DEVICE_WIDE_STREAM ? 0 : stream) + '\n');
        } catch (IOException e) {
            failed = true;
            InterposeLog.warnOnce("trace", "cannot write the trace " + path + "; tracing stops", e);
        }
    }

    @Override
    public synchronized void close() {
        try {
            out.close();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
