package dev.vmmkit.trace;

import java.io.BufferedReader;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.List;
import java.util.OptionalInt;
import java.util.zip.ZipException;

/**
 * Opens any trace file vmmkit replays, recognised by content, never by name: vmmkit's CSV
 * ({@link TraceReader}) or a PyTorch memory snapshot ({@link SnapshotReader}), each plain or gzipped.
 */
public final class TraceFiles {

    private TraceFiles() {
    }

    /**
     * Whether the vmmkit trace {@code file} (plain or gzipped) records any request: a line other than
     * a comment. A file cut short is answered by what could be read of it.
     */
    public static boolean hasRequests(Path file) throws IOException {
        try (InputStream raw = Files.newInputStream(file);
             BufferedReader lines = new BufferedReader(new InputStreamReader(TraceReader.decompressed(raw),
                     StandardCharsets.UTF_8))) {
            for (String line = lines.readLine(); line != null; line = lines.readLine()) {
                if (!line.isBlank() && !line.startsWith("#")) return true;
            }
            return false;
        } catch (EOFException | ZipException cutShort) {
            return Files.size(file) > 0; // a partial gzip with anything in it: kept for the user to look at
        }
    }

    /**
     * The traces in {@code file}: one for a CSV trace, one per device for a snapshot (only
     * {@code snapshotDevice} when given; a CSV trace has no devices and ignores it).
     */
    public static List<AllocationTrace> read(Path file, OptionalInt snapshotDevice) throws IOException {
        String source = String.valueOf(file.getFileName());
        try (InputStream raw = Files.newInputStream(file)) {
            InputStream in = TraceReader.decompressed(raw);
            if (SnapshotReader.looksLikePickle(in)) return SnapshotReader.read(in, source, snapshotDevice);
            return List.of(TraceReader.read(in, source));
        } catch (NoSuchFileException e) {
            throw new IOException("cannot read trace " + file + ": no such file", e);
        } catch (EOFException | ZipException e) {
            throw new IOException(source + ": the gzip data is cut short or damaged (a truncated file?)", e);
        }
    }
}
