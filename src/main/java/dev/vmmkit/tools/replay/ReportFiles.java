package dev.vmmkit.tools.replay;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;

import dev.vmmkit.trace.AtomicFile;

import java.io.IOException;
import java.nio.file.Path;

/** Writes reports as JSON files that are either whole or absent: never a partly written file. */
public final class ReportFiles {
    private static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

    private ReportFiles() {
    }

    /** The JSON text of {@code value} (a {@link ReplayReport} or a map of them). */
    public static String toJson(Object value) throws IOException {
        return JSON.writeValueAsString(value);
    }

    /** Writes {@code value} to a temporary file beside {@code file}, then moves it into place. */
    public static void write(Path file, Object value) throws IOException {
        AtomicFile.writeString(file, toJson(value) + "\n");
    }
}
