package dev.vmmkit.engine;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Hot reload by shadow loading: stage and check the binary now on disk, start a new instance for
 * every model the plugin serves, switch requests to the new instances at once, wait for the old
 * instances' requests in flight, then shut the old ones down. A reload that fails at any step
 * before the switch keeps the old version serving and says why.
 */
final class EngineReloader {
    private final EngineCatalog catalog;
    private final ModelRegistry registry;
    private final EngineMetrics metrics;
    private final System.Logger logger;

    EngineReloader(EngineCatalog catalog, ModelRegistry registry, EngineMetrics metrics, System.Logger logger) {
        this.catalog = catalog;
        this.registry = registry;
        this.metrics = metrics;
        this.logger = logger;
    }

    /** What one plugin's reload did. */
    record Outcome(String engine, String backend, String previousVersion, String version, List<String> models, long drainMillis) {
    }

    /**
     * Reloads every plugin of engine {@code id} (one per backend), discovering it first if it was
     * installed after start.
     *
     * @throws RequestFailure 404 for an unknown engine, 500 when the reload failed (old version kept)
     */
    List<Outcome> reload(String id) {
        List<EngineEntry> entries = catalog.withId(id);
        if (entries.isEmpty()) {
            catalog.discover();
            entries = catalog.withId(id);
            if (entries.isEmpty()) throw RequestFailure.notFound("unknown engine '" + id + "'");
            // just discovered: it was checked on discovery, nothing to switch
        }
        List<Outcome> outcomes = new ArrayList<>();
        for (EngineEntry entry : entries) outcomes.add(reload(entry));
        return outcomes;
    }

    /** Reloads one plugin. @throws RequestFailure 500 when it failed (the old version keeps serving) */
    Outcome reload(EngineEntry entry) {
        String name = entry.id() + "/" + entry.backend();
        PluginSnapshot previous = entry.snapshot();
        String previousVersion = previous == null ? null : previous.info().version();
        Map<ServedModel, RunningEngine> retired = new LinkedHashMap<>();
        List<String> switched = new ArrayList<>();
        PluginSnapshot next;
        entry.lifecycle().lock();
        entry.reloading(true);
        try {
            try {
                next = catalog.stage(entry);
            } catch (PluginLibrary.RefusedException e) {
                throw failed(entry, previousVersion, e.getMessage());
            }
            Map<ServedModel, RunningEngine> fresh = new LinkedHashMap<>();
            try {
                for (ServedModel model : registry.modelsOf(entry)) {
                    fresh.put(model, registry.startInstance(next, model.file(), model));
                }
            } catch (RuntimeException e) {
                fresh.values().forEach(RunningEngine::close);
                next.discard();
                throw failed(entry, previousVersion, "loading the models into " + next.info().version() + " failed: " + e.getMessage());
            }
            // The switch: from here on every new request goes to the new instances.
            fresh.forEach((model, instance) -> {
                RunningEngine old = model.swap(instance);
                if (old == null) {
                    instance.close(); // the model was unloaded meanwhile
                } else {
                    retired.put(model, old);
                    switched.add(model.name());
                }
            });
            entry.accept(next);
            registry.health().forgive(entry);
        } finally {
            entry.reloading(false);
            entry.lifecycle().unlock();
        }
        long drainStart = System.nanoTime();
        for (RunningEngine old : retired.values()) {
            old.gate().closeAndDrain();
            old.close();
        }
        registry.releaseFreedMemory();
        long drainMillis = (System.nanoTime() - drainStart) / 1_000_000;
        metrics.reloaded(true);
        logger.log(System.Logger.Level.INFO, "reloaded engine " + name + ": " + previousVersion + " -> "
                + next.info().version() + ", models " + switched + " switched, old instances drained in " + drainMillis + " ms");
        return new Outcome(entry.id(), entry.backend(), previousVersion, next.info().version(), switched, drainMillis);
    }

    private RequestFailure failed(EngineEntry entry, String previousVersion, String why) {
        entry.refuse(why);
        metrics.reloaded(false);
        String message = "reload of engine " + entry.id() + "/" + entry.backend() + " failed: " + why
                + (previousVersion == null ? "" : "; version " + previousVersion + " keeps serving");
        logger.log(System.Logger.Level.ERROR, message);
        return RequestFailure.engineFailed(message);
    }
}
