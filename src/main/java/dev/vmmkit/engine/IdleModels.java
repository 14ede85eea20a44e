package dev.vmmkit.engine;

import java.util.Optional;

/**
 * What happens to idle models when device memory runs short, under the host's {@link IdlePolicy}:
 * the least recently used idle model is evicted, or paused (its worker gives its device memory
 * back and keeps the contents in host memory) when the policy says so, its engine runs in a worker
 * and its copy fits the host memory allowed for paused models. A pause that fails evicts the model
 * instead. A request to a paused model wakes it ({@link #wake}): room is made on the device first
 * (other idle models paused or evicted), and a resume that finds no memory all the same answers
 * 503 with the model still paused; a resume that fails otherwise gives the instance up, and the
 * model loads again from its file.
 */
final class IdleModels {
    private final ModelRegistry registry;
    private final DeviceMemory device;
    private final EngineMetrics metrics;
    private final System.Logger logger;
    private final IdlePolicy policy;
    private final long hostMemoryLimit;

    /**
     * @param hostMemoryLimit host memory the paused models' copies may take in all, in bytes
     */
    IdleModels(ModelRegistry registry, DeviceMemory device, EngineMetrics metrics, System.Logger logger,
               IdlePolicy policy, long hostMemoryLimit) {
        this.registry = registry;
        this.device = device;
        this.metrics = metrics;
        this.logger = logger;
        this.policy = policy;
        this.hostMemoryLimit = hostMemoryLimit;
    }

    IdlePolicy policy() {
        return policy;
    }

    long hostMemoryLimit() {
        return hostMemoryLimit;
    }

    static boolean isPaused(RunningEngine instance) {
        return instance != null && instance.pausing() != null && instance.pausing().paused() != null;
    }

    /** Host memory the paused models' copies take now. */
    long hostBytesKept() {
        long sum = 0;
        for (ServedModel model : registry.models()) {
            RunningEngine instance = model.instance();
            InstancePause.Paused paused = instance == null || instance.pausing() == null ? null : instance.pausing().paused();
            if (paused != null) sum += paused.keptBytes();
        }
        return sum;
    }

    /**
     * Frees memory held by the least recently used idle model (never {@code except}, nor one whose
     * engine is under reload). For device memory ({@code vram}, {@code load}) it pauses the model
     * where the policy and the host memory limit allow, and evicts it otherwise; paused models are
     * passed over, holding no device memory. For host RAM ({@code ram}) it evicts, paused models
     * included: their copies are host memory.
     *
     * @return a line saying what was done, or empty when no model is idle
     */
    Optional<String> relieveLeastRecentlyUsedIdle(String reason, ServedModel except) {
        if (policy == IdlePolicy.EVICT || reason.equals("ram")) return registry.evictLeastRecentlyUsedIdle(reason, except);
        for (ServedModel model : registry.leastRecentlyUsedFirst()) {
            if (model == except || model.entry().reloading()) continue;
            RunningEngine instance = model.instance();
            if (instance == null || isPaused(instance)) continue;
            Optional<String> done = pauseOrEvict(model, instance, reason);
            if (done.isPresent()) return done;
        }
        return Optional.empty();
    }

    private Optional<String> pauseOrEvict(ServedModel model, RunningEngine instance, String reason) {
        InstancePause pausing = instance.pausing();
        if (pausing == null) {
            return registry.evictIfIdle(model, reason, "; its engine runs in the host's process, where models cannot pause");
        }
        long copyBytes = instance.deviceBytes();
        long kept = hostBytesKept();
        if (kept + copyBytes > hostMemoryLimit) {
            return registry.evictIfIdle(model, reason, "; pausing it would keep " + (copyBytes >> 10) + " KiB in host memory, past "
                    + "--pause-host-memory (" + (kept >> 10) + " of " + (hostMemoryLimit >> 10) + " KiB kept)");
        }
        long idleMillis = System.currentTimeMillis() - model.lastUsedMillis();
        InstancePause.Paused paused;
        try {
            paused = pausing.pauseIfIdle(instance.gate());
        } catch (InstancePause.Failed | RuntimeException e) {
            metrics.pauseFailed(model.name());
            logger.log(System.Logger.Level.WARNING, "pausing model " + model.name() + " failed: " + e.getMessage() + "; evicting it instead");
            return registry.evictIfIdle(model, reason, "; its pause failed");
        }
        if (paused == null) return Optional.empty(); // busy
        metrics.paused(model.name(), paused.nanos());
        device.drainCaches();
        return Optional.of("paused model " + model.name() + " (" + instance.manifest().id() + " " + instance.manifest().version()
                + ", " + (paused.pausedBytes() >> 10) + " KiB device memory given back, " + (paused.keptBytes() >> 10)
                + " KiB kept in host memory, in " + paused.nanos() / 1_000_000 + " ms, idle " + idleMillis + " ms)");
    }

    /**
     * Brings {@code instance} back when it is paused (the caller has entered its gate). Returns true
     * when it runs; false when its resume failed other than for lack of memory, which gives the
     * instance up (the caller looks the model up again, so it loads from its file).
     *
     * @throws RequestFailure 503 when no device memory can be found for it (it stays paused)
     */
    boolean wake(ServedModel model, RunningEngine instance) {
        InstancePause pausing = instance.pausing();
        if (pausing == null) return true;
        long nanos;
        try {
            nanos = pausing.resumeIfPaused((bytes, attempt) -> makeRoom(model, bytes, attempt));
        } catch (InstancePause.Failed e) {
            if (e.outOfMemory()) {
                instance.gate().exit();
                metrics.resumeFailed(model.name());
                throw RequestFailure.outOfMemory("model " + model.name() + " is paused and cannot resume: " + e.getMessage()
                        + ", and no idle model is left to pause or evict (device " + device.figures()
                        + "); it stays paused with its contents kept");
            }
            return giveUp(model, instance, e.getMessage());
        } catch (RuntimeException e) {
            return giveUp(model, instance, e.getMessage());
        }
        if (nanos > 0) {
            metrics.resumed(model.name(), nanos);
            logger.log(System.Logger.Level.INFO, "resumed model " + model.name() + " in " + nanos / 1_000_000 + " ms; device "
                    + device.figures());
        }
        return true;
    }

    private boolean giveUp(ServedModel model, RunningEngine instance, String why) {
        instance.gate().exit();
        metrics.resumeFailed(model.name());
        logger.log(System.Logger.Level.ERROR, "resuming model " + model.name() + " failed: " + why
                + "; its instance is ended, and the model loads again from its file");
        registry.retire(model, instance);
        return false;
    }

    /**
     * Before a resume of {@code bytes}: frees idle models until the device figures have room (the
     * first try), or frees one more (a try after a resume that found no memory all the same).
     */
    private boolean makeRoom(ServedModel waking, long bytes, int attempt) {
        boolean freedOne = false;
        for (;;) {
            MemoryFigures now = device.figures();
            if (attempt == 0 ? now.totalBytes() - now.usedBytes() >= bytes : freedOne) return true;
            Optional<String> freed = relieveLeastRecentlyUsedIdle("load", waking);
            if (freed.isEmpty()) return false;
            freedOne = true;
            logger.log(System.Logger.Level.WARNING, "resuming " + waking.name() + ": " + freed.get() + "; device now " + device.figures());
        }
    }
}
