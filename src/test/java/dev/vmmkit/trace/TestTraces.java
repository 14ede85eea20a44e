package dev.vmmkit.trace;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.zip.GZIPOutputStream;

/** Small traces written in tests, and the real traces the repository ships in {@code traces/}. */
public final class TestTraces {

    /** Figures of bert_infer.csv.gz computed independently (a Python pass over the file). */
    public static final int BERT_ALLOCS = 14_862;
    public static final int BERT_FREES = 14_860;
    public static final long BERT_PEAK_LIVE_BYTES = 744_011_432L;

    private TestTraces() {
    }

    /** The repository's copy of the real BERT trace (tests run from the repository root). */
    public static final Path BERT = Path.of("traces", "bert_infer.csv.gz");

    /** A trace shipped in the repository's {@code traces/} folder. */
    public static Path shipped(String name) {
        Path file = Path.of("traces", name);
        if (!Files.isReadable(file)) throw new IllegalStateException("the repository ships " + file + ", but it is not there");
        return file;
    }

    public static AllocationTrace parse(String text) throws IOException {
        return TraceReader.read(new ByteArrayInputStream(text.getBytes(StandardCharsets.UTF_8)), "test.csv");
    }

    public static byte[] gzip(String text) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (GZIPOutputStream gz = new GZIPOutputStream(bytes)) {
            gz.write(text.getBytes(StandardCharsets.UTF_8));
        }
        return bytes.toByteArray();
    }
}
