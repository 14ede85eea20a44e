package dev.vmmkit.trace;

import org.agrona.collections.Long2LongHashMap;

import java.io.BufferedInputStream;
import java.io.BufferedReader;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Pattern;
import java.util.zip.GZIPInputStream;
import java.util.zip.ZipException;

/**
 * Reads an allocation trace (see {@code traces/README.md}), plain or gzipped, into an
 * {@link AllocationTrace}. Gzip is recognised by its magic bytes, never by the file name.
 *
 * <p>One event a line: {@code action,addr,size,stream}. Blank lines, lines starting with {@code #}
 * and a bare {@code action,addr,size,stream} header are skipped. {@code alloc} and
 * {@code free_completed} are kept; {@code free_requested}, the {@code segment_*} actions (the
 * recording allocator's own driver traffic) and PyTorch's {@code snapshot}/{@code oom} markers are
 * checked for form and then ignored.
 *
 * <p>A free on stream 18446744073709551615 ({@link AllocationTrace#DEVICE_WIDE_STREAM}, as
 * {@code vmmkit run --trace} writes a cudaFree) is a request at its {@code free_requested}, and its
 * {@code free_completed}, later, is when its memory became reusable ({@link AllocationTrace#COVER}).
 * A {@code wait_gave_up} line right after an {@code alloc} of the same key says that the request
 * gave up waiting for such memory ({@link AllocationTrace#waitGaveUp}).
 *
 * <p>A free of a key the trace never allocated frees an allocation the program made before the trace
 * began (recording started late, or a ring buffer kept only the last entries): the free's size and
 * stream describe it, and it starts the replay ({@link AllocationTrace#allocationsBeforeTrace()}),
 * as a snapshot's do ({@link SnapshotReader}).
 *
 * <p>The first malformed line stops reading with a {@link TraceFormatException} naming the file and
 * the line: a wrong field count, a number that is not a number, a negative size, an unknown action,
 * a second free of a key without an alloc between, an alloc of a key that is live, or a
 * {@code wait_gave_up} anywhere but right after its alloc.
 */
public final class TraceReader {
    private static final String HEADER = "action,addr,size,stream";
    private static final int GZIP_MAGIC_1 = 0x1f;
    private static final int GZIP_MAGIC_2 = 0x8b;
    /** A well-formed number that did not parse was too large. */
    private static final Pattern DIGITS = Pattern.compile("[0-9]+");
    private static final Pattern HEX_DIGITS = Pattern.compile("[0-9a-fA-F]+");
    private static final Pattern SIGNED_DIGITS = Pattern.compile("[+-]?[0-9]+");

    private final String source;
    private final TraceBuilder builder = new TraceBuilder();
    /** Each cudaFree whose completion has not been read yet: its ordinal among the trace's cudaFrees. */
    private final Long2LongHashMap pendingCudaFree = new Long2LongHashMap(TraceBuilder.NOT_LIVE);
    /** Completions still to come of cudaFrees covered early (their key was freed again first). */
    private final Long2LongHashMap completionsToSkip = new Long2LongHashMap(0);
    private int cudaFrees;

    private TraceReader(String source) {
        this.source = source;
    }

    /** Reads the trace at {@code file}; its file name names it in messages. */
    public static AllocationTrace read(Path file) throws IOException {
        try (InputStream in = Files.newInputStream(file)) {
            return read(in, String.valueOf(file.getFileName()));
        }
    }

    /** Reads a trace from {@code in} (not closed), naming it {@code source} in messages. */
    public static AllocationTrace read(InputStream in, String source) throws IOException {
        try {
            return new TraceReader(source).readAll(in);
        } catch (EOFException | ZipException e) {
            // The JDK's own messages name neither the file nor the problem ("null", "Unexpected end of ZLIB input stream").
            throw new IOException(source + ": the gzip data is cut short or damaged (a truncated file?)", e);
        }
    }

    private AllocationTrace readAll(InputStream raw) throws IOException {
        BufferedReader lines = new BufferedReader(new InputStreamReader(decompressed(raw), StandardCharsets.UTF_8));
        int lineNumber = 0;
        for (String line = lines.readLine(); line != null; line = lines.readLine()) {
            if (lineNumber == Integer.MAX_VALUE) throw new TraceFormatException(source, lineNumber, "too many lines");
            lineNumber++;
            String text = line.strip();
            if (text.isEmpty() || text.startsWith("#") || isHeader(text)) continue;
            parseLine(text, lineNumber);
        }
        return builder.build(source, null);
    }

    /** The column names, however spaced ({@code action, addr, size, stream}, as a spreadsheet writes them). */
    private static boolean isHeader(String text) {
        // No action is named "action": only such a line needs its spaces taken out (not every line read).
        return text.startsWith("action") && text.length() < 64 && text.replaceAll("\\s", "").equals(HEADER);
    }

    /** Wraps {@code in} in a gzip stream when it starts with gzip's magic bytes; the result supports mark/reset. */
    static InputStream decompressed(InputStream in) throws IOException {
        BufferedInputStream buffered = new BufferedInputStream(in, 1 << 16);
        buffered.mark(2);
        int first = buffered.read();
        int second = buffered.read();
        buffered.reset();
        boolean gzipped = first == GZIP_MAGIC_1 && second == GZIP_MAGIC_2;
        return gzipped ? new BufferedInputStream(new GZIPInputStream(buffered, 1 << 16), 1 << 16) : buffered;
    }

    private void parseLine(String text, int lineNumber) throws TraceFormatException {
        String[] fields = text.split(",", -1);
        if (fields.length != 4) {
            throw malformed(lineNumber, "expected 4 fields (action,addr,size,stream), found " + fields.length);
        }
        String action = fields[0].strip();
        long key = unsignedNumber(fields[1], "addr", lineNumber);
        long size = signedNumber(fields[2], "size", lineNumber);
        long stream = unsignedNumber(fields[3], "stream", lineNumber);
        if (size < 0) throw malformed(lineNumber, "negative size " + size);
        switch (action) {
            case "alloc" -> alloc(key, size, stream, lineNumber);
            case "free_completed" -> {
                if (stream == AllocationTrace.DEVICE_WIDE_STREAM) cudaFreeCompleted(key, lineNumber);
                else free(key, size, stream, lineNumber);
            }
            case "free_requested" -> {
                if (stream == AllocationTrace.DEVICE_WIDE_STREAM) cudaFreeRequested(key, size, lineNumber);
            }
            case "wait_gave_up" -> {
                if (!builder.waitGaveUp(key)) {
                    throw malformed(lineNumber, "wait_gave_up of key " + Long.toUnsignedString(key)
                            + " that does not follow its alloc (it belongs right after the alloc line)");
                }
            }
            case "segment_alloc", "segment_free", "segment_map", "segment_unmap",
                 "snapshot", "oom" -> { }
            default -> throw malformed(lineNumber, "unknown action '" + action
                    + "' (expected alloc, free_requested, free_completed, wait_gave_up or segment_*)");
        }
    }

    private void alloc(long key, long size, long stream, int lineNumber) throws TraceFormatException {
        if (!builder.alloc(key, size, stream, lineNumber)) {
            throw malformed(lineNumber, "alloc of key " + Long.toUnsignedString(key) + ", which is already live");
        }
    }

    private void free(long key, long size, long stream, int lineNumber) throws TraceFormatException {
        if (builder.free(key, stream, lineNumber) == TraceBuilder.NOT_LIVE
                && !builder.freeBeforeTrace(key, size, stream, lineNumber)) {
            throw malformed(lineNumber, "free of key " + Long.toUnsignedString(key)
                    + ", which is already freed (a second free without an alloc between)");
        }
    }

    /**
     * A cudaFree: a free now, whose completion comes later. A key freed again before its earlier
     * free's completion was read had that memory back, so the earlier free was covered by then.
     */
    private void cudaFreeRequested(long key, long size, int lineNumber) throws TraceFormatException {
        long earlier = pendingCudaFree.remove(key);
        if (earlier != TraceBuilder.NOT_LIVE) {
            builder.cover(key, (int) earlier, lineNumber);
            completionsToSkip.put(key, completionsToSkip.get(key) + 1);
        }
        free(key, size, AllocationTrace.DEVICE_WIDE_STREAM, lineNumber);
        pendingCudaFree.put(key, cudaFrees++);
    }

    private void cudaFreeCompleted(long key, int lineNumber) throws TraceFormatException {
        long ordinal = pendingCudaFree.remove(key);
        if (ordinal != TraceBuilder.NOT_LIVE) {
            builder.cover(key, (int) ordinal, lineNumber);
            return;
        }
        long skip = completionsToSkip.get(key);
        if (skip == 0) {
            throw malformed(lineNumber, "free_completed of a cudaFree of key " + Long.toUnsignedString(key)
                    + " without its free_requested before it");
        }
        if (skip == 1) completionsToSkip.remove(key);
        else completionsToSkip.put(key, skip - 1);
    }

    /**
     * Addresses and stream handles: unsigned 64-bit numbers, decimal as PyTorch prints them, or
     * hexadecimal with {@code 0x} as a hand-written converter may (they are only keys).
     */
    private long unsignedNumber(String field, String what, int lineNumber) throws TraceFormatException {
        String text = field.strip();
        boolean hex = text.length() > 2 && (text.startsWith("0x") || text.startsWith("0X"));
        String digits = hex ? text.substring(2) : text;
        try {
            if (digits.startsWith("+")) throw new NumberFormatException(); // parseUnsignedLong takes a plus
            return Long.parseUnsignedLong(digits, hex ? 16 : 10);
        } catch (NumberFormatException e) {
            if ((hex ? HEX_DIGITS : DIGITS).matcher(digits).matches()) {
                throw malformed(lineNumber, what + " " + text + " is out of range (at most 2^64-1)");
            }
            throw malformed(lineNumber, what + " '" + text + "' is not a non-negative number (decimal, or hexadecimal with 0x)");
        }
    }

    private long signedNumber(String field, String what, int lineNumber) throws TraceFormatException {
        String text = field.strip();
        try {
            return Long.parseLong(text);
        } catch (NumberFormatException e) {
            if (SIGNED_DIGITS.matcher(text).matches()) {
                throw malformed(lineNumber, what + " " + text + " is out of range (at most 2^63-1)");
            }
            throw malformed(lineNumber, what + " '" + text + "' is not a decimal number");
        }
    }

    private TraceFormatException malformed(int lineNumber, String problem) {
        return new TraceFormatException(source, lineNumber, problem);
    }
}
