package dev.vmmkit.trace;

import java.io.FilterOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;

/**
 * A file that is either whole or absent: bytes go to a temporary file beside the target, which is
 * moved into place (atomically where the file system can) when the stream is closed. A reader never
 * sees a half-written file, and a crash leaves the previous file, or none, plus a hidden
 * {@code .NAME.*.tmp} file.
 */
public final class AtomicFile {

    private AtomicFile() {
    }

    /** Writes {@code text} (UTF-8) to {@code target} whole. */
    public static void writeString(Path target, String text) throws IOException {
        Committing out = create(target);
        try {
            out.write(text.getBytes(StandardCharsets.UTF_8));
        } catch (IOException | RuntimeException e) {
            out.discard();
            throw e;
        }
        out.close();
    }

    /**
     * A stream whose bytes become {@code target} when it is closed; {@link Committing#discard()}
     * instead deletes them and leaves the target as it was.
     */
    public static Committing create(Path target) throws IOException {
        Path absolute = target.toAbsolutePath();
        // Not Files.createTempFile: its files are private (0600); this one gets the umask's permissions.
        Path temp = absolute.resolveSibling("." + absolute.getFileName() + "." + Long.toHexString(java.util.concurrent.ThreadLocalRandom.current().nextLong()) + ".tmp");
        return new Committing(Files.newOutputStream(temp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE), temp, absolute);
    }

    /** The stream of {@link #create}: {@link #close()} moves the file into place, {@link #discard()} drops it. */
    public static final class Committing extends FilterOutputStream {
        private final Path temp;
        private final Path target;
        private boolean done;

        private Committing(OutputStream out, Path temp, Path target) {
            super(out);
            this.temp = temp;
            this.target = target;
        }

        @Override
        public void write(byte[] b, int off, int len) throws IOException {
            out.write(b, off, len);
        }

        /** Closes the temporary file and moves it to the target. */
        @Override
        public void close() throws IOException {
            if (done) return;
            done = true;
            try {
                out.close();
                try {
                    Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
                } catch (AtomicMoveNotSupportedException e) {
                    Files.move(temp, target, StandardCopyOption.REPLACE_EXISTING);
                }
            } finally {
                Files.deleteIfExists(temp);
            }
        }

        /** Drops what was written; the target stays as it was. */
        public void discard() throws IOException {
            if (done) return;
            done = true;
            try {
                out.close();
            } finally {
                Files.deleteIfExists(temp);
            }
        }
    }
}
