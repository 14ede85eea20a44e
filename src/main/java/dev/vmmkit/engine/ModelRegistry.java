package dev.vmmkit.engine;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The loaded models and their in-flight requests: loads a model on first use (one load per model,
 * however many requests wait for it), hands out {@link Lease}s, unloads, and evicts (or, with
 * {@link IdlePolicy#PAUSE}, pauses) idle models in least-recently-used order. A load that finds no
 * device memory evicts or pauses idle models and retries before it answers 503; a request to a
 * paused model resumes it first ({@link IdleModels}).
 */
final class ModelRegistry {
    private final EngineCatalog catalog;
    private final ModelDirectory modelDirectory;
    private final DeviceMemory device;
    private final EngineMetrics metrics;
    private final System.Logger logger;
    private final EngineLauncher launcher;
    private final ModelHealth health = new ModelHealth();
    private final ConcurrentHashMap<String, ServedModel> models = new ConcurrentHashMap<>();
    private final IdleModels idle;

    ModelRegistry(EngineCatalog catalog, ModelDirectory modelDirectory, DeviceMemory device,
                  EngineMetrics metrics, System.Logger logger, EngineLauncher launcher) {
        this(catalog, modelDirectory, device, metrics, logger, launcher, IdlePolicy.EVICT, 0);
    }

    ModelRegistry(EngineCatalog catalog, ModelDirectory modelDirectory, DeviceMemory device,
                  EngineMetrics metrics, System.Logger logger, EngineLauncher launcher,
                  IdlePolicy policy, long pauseHostMemoryBytes) {
        this.catalog = catalog;
        this.modelDirectory = modelDirectory;
        this.device = device;
        this.metrics = metrics;
        this.logger = logger;
        this.launcher = launcher;
        this.idle = new IdleModels(this, device, metrics, logger, policy, pauseHostMemoryBytes);
    }

    /** Pausing and waking idle models. */
    IdleModels idle() {
        return idle;
    }

    /** Crashes per model and the models marked failed. */
    ModelHealth health() {
        return health;
    }

    /** A request's hold on one instance of a model; closing it counts the request out. */
    record Lease(ServedModel model, RunningEngine instance) implements AutoCloseable {
        @Override
        public void close() {
            model.touch();
            instance.gate().exit();
        }
    }

    /**
     * Enters the model's current instance, loading the model first if it is not loaded.
     *
     * @throws RequestFailure 400/404 for a bad or unknown name, 503 without device memory, 500 when the engine fails
     */
    Lease acquire(String name) {
        ModelDirectory.checkName(name);
        for (;;) {
            String failure = health.failure(name);
            if (failure != null) throw RequestFailure.modelFailed("model '" + name + "' is marked failed: " + failure);
            ServedModel model = models.get(name);
            if (model == null) {
                ServedModel fresh = choose(name);
                model = models.putIfAbsent(name, fresh);
                if (model == null) {
                    model = fresh;
                    load(fresh);
                }
            }
            model.awaitLoaded();
            RunningEngine instance = model.enter();
            if (instance != null && instance.alive()) {
                if (idle.wake(model, instance)) return new Lease(model, instance);
                continue; // its resume failed: the instance was given up, and the model loads again
            }
            if (instance != null) {
                // its worker died and the news is on its way: take the model away here, and load it again
                instance.gate().exit();
                retire(model, instance);
            }
            // unloaded or evicted between lookup and entry: look it up again
        }
    }

    /** The loaded models (a snapshot). */
    List<ServedModel> models() {
        return models.values().stream().filter(m -> m.instance() != null)
                .sorted(Comparator.comparing(ServedModel::name)).toList();
    }

    /** The loaded models served by {@code entry}. */
    List<ServedModel> modelsOf(EngineEntry entry) {
        return models().stream().filter(m -> m.entry() == entry).toList();
    }

    /** True when some loaded model runs on {@code entry}. */
    boolean serves(EngineEntry entry) {
        return models.values().stream().anyMatch(m -> m.entry() == entry && m.instance() != null);
    }

    /**
     * Unloads a model once its in-flight requests have finished.
     *
     * @return false when it was not loaded
     */
    boolean unload(String name) {
        ModelDirectory.checkName(name);
        ServedModel model = models.get(name);
        // Still loading (no instance yet): not loaded, and left alone so its load is not orphaned.
        if (model == null || model.instance() == null) return false;
        RunningEngine instance = model.detach();
        models.remove(name, model);
        if (instance == null) return false;
        instance.gate().closeAndDrain();
        instance.close();
        device.drainCaches();
        logger.log(System.Logger.Level.INFO, "unloaded model " + name);
        return true;
    }

    /**
     * Evicts the least recently used model with nothing in flight (never {@code except}, nor a model
     * whose engine is being reloaded: the reload holds two instances of it for a moment), frees
     * its device memory and gives the allocator's cache back to the driver.
     *
     * @param reason for the log and the metrics: {@code vram}, {@code ram} or {@code load}
     * @return a line describing what was evicted, or empty when no model is idle
     */
    Optional<String> evictLeastRecentlyUsedIdle(String reason, ServedModel except) {
        for (ServedModel model : leastRecentlyUsedFirst()) {
            if (model == except || model.entry().reloading()) continue;
            // a paused model holds no device memory: only host RAM is freed by evicting it
            if (!reason.equals("ram") && IdleModels.isPaused(model.instance())) continue;
            Optional<String> evicted = evictIfIdle(model, reason, "");
            if (evicted.isPresent()) return evicted;
        }
        return Optional.empty();
    }

    /** The models, least recently used first. */
    List<ServedModel> leastRecentlyUsedFirst() {
        List<ServedModel> candidates = new ArrayList<>(models.values());
        candidates.sort(Comparator.comparingLong(ServedModel::lastUsedNanos));
        return candidates;
    }

    /**
     * Evicts {@code model} when nothing is in flight on it and no pause or resume of it runs; a
     * line saying what was evicted (with {@code why} appended), or empty when it is busy.
     */
    Optional<String> evictIfIdle(ServedModel model, String reason, String why) {
        RunningEngine current = model.instance();
        InstancePause pausing = current == null ? null : current.pausing();
        RunningEngine instance = pausing == null ? model.evictIfIdle() : pausing.unlessTransitioning(model::evictIfIdle);
        if (instance == null) return Optional.empty();
        models.remove(model.name(), model);
        metrics.evicted(reason); // counted as it leaves the listing, so the two never disagree
        long bytes = instance.deviceBytes();
        boolean paused = IdleModels.isPaused(instance);
        long idleMillis = System.currentTimeMillis() - model.lastUsedMillis();
        instance.close();
        device.drainCaches();
        return Optional.of("evicted " + (paused ? "paused " : "") + "model " + model.name() + " ("
                + instance.manifest().id() + " " + instance.manifest().version() + ", " + (bytes >> 10)
                + " KiB device memory, idle " + idleMillis + " ms)" + why);
    }

    /**
     * Starts an instance of {@code snapshot} holding {@code file}; when it finds no device memory,
     * evicts idle models (least recently used first, never {@code forModel}) and tries again.
     *
     * @throws RequestFailure 503 when nothing idle is left to evict, 500 when the engine fails
     */
    RunningEngine startInstance(PluginSnapshot snapshot, ModelDirectory.ModelFile file, ServedModel forModel) {
        for (;;) {
            try {
                return launcher.start(snapshot, file, (engine, death) -> workerDied(forModel, engine, death));
            } catch (EngineInstance.OutOfMemoryOnLoad e) {
                // A model larger than the whole device never fits: evicting others would only lose them.
                long total = device.figures().totalBytes();
                if (total > 0 && e.neededBytes() > total) {
                    throw RequestFailure.outOfMemory("model " + file.name() + " cannot fit this device: loading it needs at least "
                            + e.neededBytes() + " bytes (" + (e.neededBytes() >> 20) + " MiB) of device memory, and the device has "
                            + total + " bytes (" + (total >> 20) + " MiB) in all; no model was evicted");
                }
                Optional<String> evicted = idle.relieveLeastRecentlyUsedIdle("load", forModel);
                if (evicted.isEmpty()) {
                    throw RequestFailure.outOfMemory(e.getMessage() + "; no idle model left to evict (device "
                            + device.figures() + ")");
                }
                logger.log(System.Logger.Level.WARNING, "loading " + file.name() + ": " + evicted.get()
                        + "; device now " + device.figures());
            }
        }
    }

    /**
     * A model's worker died after its load (its requests in flight fail on their own): the crash
     * is counted, and when the worker is still the model's current instance the model leaves the
     * registry, to be loaded again on its next request. Runs on the worker's reader thread, so the
     * dead instance is drained and closed elsewhere.
     */
    private void workerDied(ServedModel model, WorkerEngine engine, WorkerProcess.Death death) {
        if (model.instance() != engine) {
            // unloaded, evicted or replaced meanwhile (a crash in engine_shutdown): counted, nothing to retire
            metrics.crashed(model.name());
            if (death.timedOut()) metrics.timedOut(model.name());
            logger.log(System.Logger.Level.WARNING, "model " + model.name() + ": " + death.cause());
            return;
        }
        crashed(model.name(), model.entry(), death.timedOut(), death.cause());
        retire(model, engine);
    }

    private void crashed(String name, EngineEntry entry, boolean timedOut, String cause) {
        metrics.crashed(name);
        if (timedOut) metrics.timedOut(name);
        ModelHealth.Failure failure = health.crashed(name, entry, cause);
        logger.log(System.Logger.Level.ERROR, "model " + name + ": " + cause
                + (failure == null ? "; it loads again on its next request" : "; marked failed: " + failure.reason()));
    }

    /** Takes a dead instance away from its model (if it is still there) and closes it once its requests left. */
    void retire(ServedModel model, RunningEngine dead) {
        if (model.retire(dead)) models.remove(model.name(), model);
        Thread.ofVirtual().name("engine-retire-" + model.name()).start(() -> {
            dead.gate().closeAndDrain();
            dead.close();
        });
    }

    /** Gives device memory freed by closed instances back to the driver (after a reload). */
    void releaseFreedMemory() {
        device.drainCaches();
    }

    /** Unloads everything (host shutdown), waiting for requests in flight. */
    void closeAll() {
        for (String name : List.copyOf(models.keySet())) unload(name);
    }

    private ServedModel choose(String name) {
        List<ModelDirectory.ModelFile> files = modelDirectory.find(name);
        for (ModelDirectory.ModelFile file : files) {
            Optional<EngineEntry> entry = catalog.select(file.format(), file.architecture(), device.backends());
            if (entry.isPresent()) return new ServedModel(file, entry.get());
        }
        ModelDirectory.ModelFile first = files.getFirst();
        throw RequestFailure.notFound("no available engine serves model '" + name + "' (format "
                + files.stream().map(ModelDirectory.ModelFile::format).toList()
                + (first.architecture() == null ? "" : ", architecture " + first.architecture())
                + ", backends " + device.backends() + ")");
    }

    private void load(ServedModel model) {
        EngineEntry entry = model.entry();
        entry.lifecycle().lock();
        try {
            PluginSnapshot snapshot = entry.snapshot();
            if (snapshot == null) {
                throw RequestFailure.engineFailed("engine " + entry.id() + "/" + entry.backend() + " is refused: " + entry.rejection());
            }
            long started = System.nanoTime();
            RunningEngine instance;
            try {
                instance = startInstance(snapshot, model.file(), model);
            } catch (RequestFailure failure) {
                if (failure.workerDied()) crashed(model.name(), entry, failure.status() == 504, failure.getMessage());
                throw failure;
            }
            if (health.crashedBefore(model.name())) metrics.restarted(model.name());
            model.loaded(instance);
            logger.log(System.Logger.Level.INFO, "loaded model " + model.name() + " on " + snapshot.manifest().id() + " "
                    + snapshot.manifest().version() + "/" + snapshot.manifest().gpuBackend() + " in "
                    + (System.nanoTime() - started) / 1_000_000 + " ms, " + (instance.deviceBytes() >> 10)
                    + " KiB device memory; device " + device.figures());
        } catch (RuntimeException e) {
            models.remove(model.name(), model);
            model.failed(e);
            throw e;
        } finally {
            entry.lifecycle().unlock();
        }
    }
}
