package dev.vmmkit.tools;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * The files a command will write (stats, trace, JSON or HTML report), checked before its work
 * starts: each must be a writable file in an existing folder, so a typo fails at once rather than
 * after a long run. {@link #removeStale()} deletes older files at those paths, so that whatever is
 * there afterwards belongs to this run.
 */
public final class OutputFiles {

    /** One output: what it is for (for messages) and where it goes. */
    public record Output(String what, Path path) {
    }

    private final List<Output> outputs = new ArrayList<>();

    /** Adds {@code path} (ignored when null) as the {@code what} file, e.g. "stats file". */
    public OutputFiles add(String what, Path path) {
        if (path != null) outputs.add(new Output(what, path.toAbsolutePath().normalize()));
        return this;
    }

    /**
     * The first output that cannot be written, as one line naming it and its path; empty when all
     * can. A probe file is created and deleted in each folder, so permissions are really tested.
     */
    public Optional<String> problem() {
        for (Output output : outputs) {
            Path path = output.path();
            Path folder = path.getParent();
            String start = output.what() + " " + path + ": ";
            if (Files.isDirectory(path)) return Optional.of(start + "is a folder");
            if (folder == null || !Files.isDirectory(folder)) return Optional.of(start + "the folder " + folder + " does not exist");
            try {
                Files.delete(Files.createTempFile(folder, ".vmmkit-probe", ".tmp"));
            } catch (IOException | SecurityException e) {
                return Optional.of(start + "cannot write in " + folder + " (" + e.getClass().getSimpleName() + ")");
            }
        }
        return Optional.empty();
    }

    /** Deletes the files of an earlier run. */
    public void removeStale() throws IOException {
        for (Output output : outputs) Files.deleteIfExists(output.path());
    }
}
