package dev.vmmkit.interpose;

import dev.vmmkit.trace.AtomicFile;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Map;
import java.util.function.BiConsumer;

/**
 * Where a program's peak profile lives, chosen by {@code VMM_PROFILE}: {@code auto} (the default) is
 * one file per program ({@link ProgramIdentity#key()}) in {@code $XDG_CACHE_HOME/vmmkit/profiles/}
 * (or {@code ~/.cache/vmmkit/profiles/}); {@code off} keeps none; anything else is the path of the
 * profile file itself, used whatever program wrote it.
 *
 * <p>Reading never fails the program: a file that is missing is a first run; one that cannot be read,
 * is not JSON, is whole but of another version, or (auto) belongs to another program is ignored with
 * one warning. Writing replaces the file atomically ({@link AtomicFile}) under a lock file beside
 * it, so runs of one program ending together neither tear the file nor lose each other's devices:
 * each run's devices replace the same devices' entries, and other devices' entries stay.
 */
final class PeakProfileStore {
    static final String KEY = "VMM_PROFILE";
    /** How long a run waits at its exit for another run of the same program to finish saving. */
    private static final long LOCK_WAIT_MILLIS = 2_000;

    private final Path file;
    private final boolean perProgram;

    private PeakProfileStore(Path file, boolean perProgram) {
        this.file = file;
        this.perProgram = perProgram;
    }

    /** The problem with {@code VMM_PROFILE}'s value in {@code env} (one line naming it and the rule), or null. */
    static String problem(Map<String, String> env) {
        String value = env.get(KEY);
        if (value == null || value.isBlank() || value.trim().equals("off") || value.trim().equals("auto")) return null;
        Path path = Path.of(value.trim()).toAbsolutePath();
        String rule = ": must be off, auto (a file per program in the user's cache folder) or the path of a profile file";
        if (Files.isDirectory(path)) return KEY + "=" + value + rule + "; this is a folder";
        if (!Files.isDirectory(path.getParent())) return KEY + "=" + value + rule + "; the folder " + path.getParent() + " does not exist";
        return null;
    }

    /** The store {@code env} chooses for {@code program}, or null when profiles are off. */
    static PeakProfileStore fromEnvironment(Map<String, String> env, ProgramIdentity program) {
        String value = env.getOrDefault(KEY, "").trim();
        if (value.equals("off")) return null;
        if (!value.isEmpty() && !value.equals("auto")) return new PeakProfileStore(Path.of(value).toAbsolutePath(), false);
        return new PeakProfileStore(cacheFolder(env).resolve(program.key() + ".json"), true);
    }

    /** {@code $XDG_CACHE_HOME/vmmkit/profiles}, or {@code $HOME/.cache/...} (a relative XDG_CACHE_HOME is ignored, as the XDG rules say). */
    static Path cacheFolder(Map<String, String> env) {
        String xdg = env.get("XDG_CACHE_HOME");
        Path base = xdg != null && !xdg.isBlank() && Path.of(xdg).isAbsolute()
                ? Path.of(xdg)
                : Path.of(env.getOrDefault("HOME", System.getProperty("user.home")), ".cache");
        return base.resolve("vmmkit").resolve("profiles");
    }

    Path file() {
        return file;
    }

    /** The profile of {@code program}, or null: none yet, or one ignored after a warning to {@code warn}. */
    PeakProfile load(ProgramIdentity program, BiConsumer<String, Throwable> warn) {
        String text;
        try {
            text = Files.readString(file);
        } catch (NoSuchFileException firstRun) {
            return null;
        } catch (IOException | RuntimeException e) {
            warn.accept("cannot read the peak profile " + file + "; running without it", e);
            return null;
        }
        try {
            PeakProfile profile = PeakProfile.parse(text);
            if (perProgram && !profile.program().equals(program)) {
                warn.accept("the peak profile " + file + " belongs to another program (" + profile.program().executable()
                        + "); running without it", null);
                return null;
            }
            return profile;
        } catch (IOException e) {
            warn.accept("the peak profile " + file + " is not usable (" + e.getMessage() + "); running without it", null);
            return null;
        }
    }

    /**
     * Merges {@code fresh} into the file: its devices replace the file's entries for them. A file
     * that cannot be read, or that belongs to another program, is replaced.
     *
     * @throws IOException when the folder cannot be made, the lock not taken in time, or the file not written
     */
    void save(PeakProfile fresh) throws IOException {
        Files.createDirectories(file.getParent());
        Path lockFile = file.resolveSibling(file.getFileName() + ".lock");
        try (FileChannel channel = FileChannel.open(lockFile, StandardOpenOption.CREATE, StandardOpenOption.WRITE);
             FileLock ignored = lock(channel)) {
            PeakProfile old = load(fresh.program(), (message, cause) -> { });
            PeakProfile merged = old != null && old.program().equals(fresh.program()) ? old.updatedWith(fresh) : fresh;
            AtomicFile.writeString(file, merged.toJson());
        }
    }

    private FileLock lock(FileChannel channel) throws IOException {
        long deadline = System.nanoTime() + LOCK_WAIT_MILLIS * 1_000_000;
        while (true) {
            FileLock lock;
            try {
                lock = channel.tryLock();
            } catch (java.nio.channels.OverlappingFileLockException heldInThisProcess) {
                lock = null; // another session of this JVM (tests) is saving: wait as for another process
            }
            if (lock != null) return lock;
            if (System.nanoTime() > deadline) throw new IOException("another run has held " + file + ".lock for "
                    + LOCK_WAIT_MILLIS + " ms");
            try {
                Thread.sleep(10);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("interrupted while waiting for " + file + ".lock", e);
            }
        }
    }
}
