package dev.vmmkit.engine;

import java.nio.file.Path;

/**
 * Loads a staged plugin binary once to read and check its {@code engine_get_info()} and symbols
 * ({@link PluginLibrary#open}), then unloads it: in the host's process, or in a worker
 * ({@link WorkerProbe}), where a plugin whose library constructors or {@code engine_get_info}
 * crash or hang ends only that worker. One probe serves one discovery pass or one reload.
 */
interface PluginProbe extends AutoCloseable {
    /** Probing in the host's own process (in-process isolation: trusted plugins). */
    PluginProbe IN_PROCESS = (staged, privateDir, manifest) -> {
        try (PluginLibrary library = PluginLibrary.open(staged, privateDir, manifest)) {
            return library.info();
        }
    };

    /**
     * What the binary's engine_get_info() reported, checked against {@code manifest}.
     *
     * @throws PluginLibrary.RefusedException naming what was wrong, or how the probe ended
     */
    PluginLibrary.Info probe(Path staged, Path privateDir, EngineManifest manifest) throws PluginLibrary.RefusedException;

    /** Ends what the probe started (its worker). */
    @Override
    default void close() {
    }
}
