package dev.vmmkit.engine;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A verified copy of a plugin binary as it was on disk at one moment, from which engine instances
 * are made. Staging the copy once per load or reload means every instance of one version comes
 * from the same bytes, even if the installed file is being rewritten meanwhile.
 *
 * @param manifest the manifest read with it
 * @param staged   the staged copy, in the host's private directory
 * @param info     what the binary's engine_get_info() reported (already checked)
 */
record PluginSnapshot(EngineManifest manifest, Path staged, PluginLibrary.Info info) {
    private static final AtomicLong STAGED = new AtomicLong();

    /**
     * Copies the manifest's binary and has {@code probe} load the copy once to read and check
     * engine_get_info() and the symbols.
     *
     * @throws PluginLibrary.RefusedException when the binary cannot be used; nothing is left behind
     */
    static PluginSnapshot take(EngineManifest manifest, Path privateDir, PluginProbe probe) throws PluginLibrary.RefusedException {
        Path staged = privateDir.resolve("staged-" + STAGED.incrementAndGet() + "-" + manifest.binary().getFileName());
        try {
            Files.copy(manifest.binary(), staged);
        } catch (IOException e) {
            throw new PluginLibrary.RefusedException("cannot copy " + manifest.binary() + ": " + e);
        }
        try {
            return new PluginSnapshot(manifest, staged, probe.probe(staged, privateDir, manifest));
        } catch (PluginLibrary.RefusedException | RuntimeException e) {
            deleteQuietly(staged);
            throw e;
        }
    }

    /** Deletes the staged copy once no new instance will be made from it. */
    void discard() {
        deleteQuietly(staged);
    }

    private static void deleteQuietly(Path file) {
        try {
            Files.deleteIfExists(file);
        } catch (IOException ignored) {
            // left for the private directory's clean-up
        }
    }
}
