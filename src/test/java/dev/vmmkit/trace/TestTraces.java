package dev.vmmkit.trace;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.zip.GZIPOutputStream;

/** Small traces written in tests, and where the shared real traces are. */
public final class TestTraces {

    /** Figures of bert_infer.csv.gz computed independently (a Python pass over the file). */
    public static final int BERT_ALLOCS = 14_862;
    public static final int BERT_FREES = 14_860;
    public static final long BERT_PEAK_LIVE_BYTES = 744_011_432L;

    private TestTraces() {
    }

    /**
     * The real BERT trace: {@code shared/traces} next to the repository root (the main checkout), one
     * level further up (a worktree under {@code wt/}), or inside the root (the device machine's copy).
     */
    public static Optional<Path> bert() {
        for (String dir : List.of("../shared/traces", "../../shared/traces", "shared/traces")) {
            Path file = Path.of(dir, "bert_infer.csv.gz");
            if (Files.isReadable(file)) return Optional.of(file);
        }
        return Optional.empty();
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
