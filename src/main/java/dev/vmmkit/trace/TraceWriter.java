package dev.vmmkit.trace;

import java.io.BufferedWriter;
import java.io.Closeable;
import java.io.IOException;
import java.io.OutputStream;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.zip.GZIPOutputStream;

/**
 * Records allocation events in the trace format {@link TraceReader} reads, so that a program run
 * under vmmkit can be replayed later. The first line is a {@code #} header comment; then one line an
 * event. A free is written as {@code free_requested} followed by {@code free_completed}, as PyTorch's
 * memory history writes it: at once, or with other events between for a cudaFree whose memory
 * became reusable later ({@link TraceFileRecorder}).
 *
 * <p>Thread-safe: each event is written whole under the writer's lock, so lines of concurrent
 * threads never interleave. Output is buffered; {@link #close()} (or {@link #flush()}) makes it
 * durable. A file whose name ends in {@code .gz} is gzipped.
 */
public final class TraceWriter implements Closeable {
    private final Writer out;
    /** Reused under the lock so that writing an event makes no garbage beyond the line's digits. */
    private final StringBuilder line = new StringBuilder(80);
    private boolean closed;

    /**
     * Writes to {@code file}, replacing it when closed (through a temporary file, see
     * {@link AtomicFile}); gzipped when the name ends in {@code .gz}.
     */
    public static TraceWriter open(Path file, String description) throws IOException {
        AtomicFile.Committing atomic = AtomicFile.create(file);
        OutputStream stream = atomic;
        try {
            if (String.valueOf(file.getFileName()).endsWith(".gz")) stream = new GZIPOutputStream(stream, 1 << 16);
            return new TraceWriter(new OutputStreamWriter(stream, StandardCharsets.UTF_8), description);
        } catch (IOException | RuntimeException e) {
            atomic.discard();
            throw e;
        }
    }

    /**
     * Writes to {@code out}, which this writer closes.
     *
     * @param description what was recorded, appended to the header comment (may be empty)
     */
    public TraceWriter(Writer out, String description) throws IOException {
        this.out = new BufferedWriter(out, 1 << 16);
        String header = "# action,addr,size,stream  (vmmkit trace" + (description.isBlank() ? "" : ", " + description.strip()) + ")";
        this.out.write(header.replace('\n', ' '));
        this.out.write('\n');
    }

    /** Records that {@code size} bytes were allocated at {@code address} for {@code stream}. */
    public synchronized void alloc(long address, long size, long stream) throws IOException {
        event("alloc", address, size, stream);
    }

    /**
     * Records that the allocation just written at {@code address} ({@link #alloc}, the line before)
     * gave up waiting for memory freed by cudaFree: the device had not finished the work before
     * those frees within the bound, and the request was placed on other memory.
     */
    public synchronized void waitGaveUp(long address, long size, long stream) throws IOException {
        event("wait_gave_up", address, size, stream);
    }

    /** Records the free of the {@code size}-byte allocation at {@code address}, completed at once. */
    public synchronized void free(long address, long size, long stream) throws IOException {
        event("free_requested", address, size, stream);
        event("free_completed", address, size, stream);
    }

    /** Records that the program freed the allocation at {@code address}; its completion is written later. */
    public synchronized void freeRequested(long address, long size, long stream) throws IOException {
        event("free_requested", address, size, stream);
    }

    /** Records that the memory of an earlier {@link #freeRequested} became reusable. */
    public synchronized void freeCompleted(long address, long size, long stream) throws IOException {
        event("free_completed", address, size, stream);
    }

    public synchronized void flush() throws IOException {
        ensureOpen();
        out.flush();
    }

    @Override
    public synchronized void close() throws IOException {
        if (closed) return;
        closed = true;
        out.close();
    }

    private void event(String action, long address, long size, long stream) throws IOException {
        ensureOpen();
        if (size < 0) throw new IllegalArgumentException("negative size " + size);
        line.setLength(0);
        line.append(action).append(',');
        appendUnsigned(address).append(',').append(size).append(',');
        appendUnsigned(stream).append('\n');
        out.append(line);
    }

    /** Addresses and stream handles are unsigned 64-bit values, as the reader parses them. */
    private StringBuilder appendUnsigned(long value) {
        return value >= 0 ? line.append(value) : line.append(Long.toUnsignedString(value));
    }

    private void ensureOpen() throws IOException {
        if (closed) throw new IOException("trace writer is closed");
    }
}
