package dev.vmmkit.engine;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.function.Supplier;
import java.util.stream.Stream;

/**
 * The plugins installed under {@code engines/{id}/{backend}/}, each checked on discovery: manifest
 * parsed, binary staged and its engine_get_info() verified (by a {@link PluginProbe}). A refused plugin is listed with its
 * reason and an alert log line; it never stops the host. Also chooses the engine for a model.
 */
final class EngineCatalog {
    private final Path enginesDir;
    private final Path privateDir;
    private final System.Logger logger;
    /** A probe for each discovery pass and each reload: in a worker, or in process (see {@link EngineLauncher#probe}). */
    private final Supplier<PluginProbe> probes;
    /** Keyed "id/backend", sorted, so listings and choices are stable. */
    private final Map<String, EngineEntry> entries = new ConcurrentSkipListMap<>();

    EngineCatalog(Path enginesDir, Path privateDir, System.Logger logger, Supplier<PluginProbe> probes) {
        this.probes = probes;
        this.enginesDir = enginesDir;
        this.privateDir = privateDir;
        this.logger = logger;
    }

    /** Adds and checks every plugin directory not seen before; returns the ones added. */
    synchronized List<EngineEntry> discover() {
        List<EngineEntry> added = new ArrayList<>();
        try (PluginProbe probe = probes.get()) {
            for (Path backendDir : backendDirs()) {
                String id = backendDir.getParent().getFileName().toString();
                String backend = backendDir.getFileName().toString();
                String key = id + "/" + backend;
                if (entries.containsKey(key)) continue;
                EngineEntry entry = new EngineEntry(id, backend, backendDir);
                try {
                    PluginSnapshot snapshot = stage(entry, probe);
                    entry.accept(snapshot);
                    logger.log(System.Logger.Level.INFO, "engine " + key + " " + snapshot.info().version() + " available");
                } catch (PluginLibrary.RefusedException e) {
                    entry.refuse(e.getMessage());
                }
                entries.put(key, entry);
                added.add(entry);
            }
        }
        return added;
    }

    /**
     * Reads the entry's manifest again and stages and checks its binary as it is on disk now.
     * A refusal is logged as an alert naming the plugin; the entry itself is not changed.
     */
    PluginSnapshot stage(EngineEntry entry) throws PluginLibrary.RefusedException {
        try (PluginProbe probe = probes.get()) {
            return stage(entry, probe);
        }
    }

    private PluginSnapshot stage(EngineEntry entry, PluginProbe probe) throws PluginLibrary.RefusedException {
        try {
            EngineManifest manifest = EngineManifest.read(entry.dir());
            return PluginSnapshot.take(manifest, privateDir, probe);
        } catch (EngineManifest.InvalidManifestException | PluginLibrary.RefusedException e) {
            logger.log(System.Logger.Level.ERROR, "ALERT engine " + entry.id() + "/" + entry.backend()
                    + " refused: " + e.getMessage());
            throw new PluginLibrary.RefusedException(e.getMessage());
        }
    }

    List<EngineEntry> entries() {
        return List.copyOf(entries.values());
    }

    /** The plugins of one engine id (one per backend). */
    List<EngineEntry> withId(String id) {
        return entries.values().stream().filter(e -> e.id().equals(id)).toList();
    }

    /**
     * The engine for a model: the first backend of {@code backends} that has a usable plugin
     * listing the format (and the architecture, when given); within a backend, by id.
     */
    Optional<EngineEntry> select(String format, String architecture, List<String> backends) {
        for (String backend : backends) {
            Optional<EngineEntry> found = entries.values().stream()
                    .filter(e -> e.backend().equals(backend))
                    .filter(e -> e.snapshot() != null && e.snapshot().manifest().serves(format, architecture))
                    .findFirst();
            if (found.isPresent()) return found;
        }
        return Optional.empty();
    }

    /** Drops every staged snapshot (host shutdown). */
    void discardAll() {
        entries.values().forEach(EngineEntry::discard);
    }

    private List<Path> backendDirs() {
        if (!Files.isDirectory(enginesDir)) return List.of();
        try (Stream<Path> ids = Files.list(enginesDir)) {
            List<Path> dirs = new ArrayList<>();
            for (Path idDir : ids.filter(Files::isDirectory).sorted().toList()) {
                try (Stream<Path> backends = Files.list(idDir)) {
                    backends.filter(Files::isDirectory).sorted(Comparator.naturalOrder()).forEach(dirs::add);
                }
            }
            return dirs;
        } catch (IOException e) {
            logger.log(System.Logger.Level.WARNING, "cannot list " + enginesDir + ": " + e);
            return List.of();
        }
    }
}
