package dev.vmmkit.engine;

import dev.vmmkit.driver.VmmDriver;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * The engine host, wired together: the plugin catalog, the model registry over vmmkit's allocator,
 * the reloader, and two background tasks, the resource monitor and (optionally) the binary watcher.
 * {@link EngineHttpServer} puts it on HTTP.
 */
public final class EngineHost implements AutoCloseable {
    static final System.Logger LOGGER = System.getLogger("dev.vmmkit.engine");

    /**
     * @param enginesDir    {@code engines/{id}/{backend}/manifest.json} live here
     * @param modelsDir     model files {@code NAME.EXT} (and optional {@code NAME.json}) live here
     * @param vramThreshold device memory share past which idle models are evicted (0..1]
     * @param ramThreshold  host RAM share past which caches are cleared and idle models evicted (0..1]
     * @param pollInterval  how often memory and (with {@code watch}) plugin files are checked
     * @param watch         reload a plugin on its own when its files change
     * @param isolation     engine instances in worker processes, or in the host's process
     * @param requestTimeout how long one engine call may run before its worker is ended (worker isolation)
     * @param idlePolicy    evict idle models when device memory runs short, or pause them (worker isolation)
     * @param pauseHostMemoryBytes host memory the paused models' contents may take in all;
     *                      {@link #AUTO_PAUSE_HOST_MEMORY}: half the host's RAM
     */
    public record Settings(Path enginesDir, Path modelsDir, double vramThreshold, double ramThreshold,
                           Duration pollInterval, boolean watch, Isolation isolation, Duration requestTimeout,
                           IdlePolicy idlePolicy, long pauseHostMemoryBytes) {
        public static final Duration DEFAULT_REQUEST_TIMEOUT = Duration.ofSeconds(300);
        /** {@code --pause-host-memory auto}: half the host's RAM (or of the cgroup's limit when lower). */
        public static final long AUTO_PAUSE_HOST_MEMORY = -1;

        /** Idle models evicted, not paused. */
        public Settings(Path enginesDir, Path modelsDir, double vramThreshold, double ramThreshold,
                        Duration pollInterval, boolean watch, Isolation isolation, Duration requestTimeout) {
            this(enginesDir, modelsDir, vramThreshold, ramThreshold, pollInterval, watch, isolation, requestTimeout,
                    IdlePolicy.EVICT, AUTO_PAUSE_HOST_MEMORY);
        }

        /** Worker isolation with the default request timeout. */
        public Settings(Path enginesDir, Path modelsDir, double vramThreshold, double ramThreshold,
                        Duration pollInterval, boolean watch) {
            this(enginesDir, modelsDir, vramThreshold, ramThreshold, pollInterval, watch, Isolation.WORKER, DEFAULT_REQUEST_TIMEOUT);
        }

        public Settings {
            if (isolation == null) throw new IllegalArgumentException("--isolation must be given");
            if (idlePolicy == null) throw new IllegalArgumentException("--idle-policy must be given");
            if (pauseHostMemoryBytes < 0 && pauseHostMemoryBytes != AUTO_PAUSE_HOST_MEMORY) {
                throw new IllegalArgumentException("--pause-host-memory must be a size or auto: " + pauseHostMemoryBytes);
            }
            if (requestTimeout.toMillis() < 1) throw new IllegalArgumentException("--request-timeout must be at least 1 ms: " + requestTimeout);
            if (!Files.isDirectory(enginesDir)) throw new IllegalArgumentException("engines directory " + enginesDir + " does not exist");
            if (!Files.isDirectory(modelsDir)) throw new IllegalArgumentException("models directory " + modelsDir + " does not exist");
            if (!(vramThreshold > 0 && vramThreshold <= 1)) throw new IllegalArgumentException("--vram-threshold must be in (0, 1]: " + vramThreshold);
            if (!(ramThreshold > 0 && ramThreshold <= 1)) throw new IllegalArgumentException("--ram-threshold must be in (0, 1]: " + ramThreshold);
            if (pollInterval.toMillis() < 1) throw new IllegalArgumentException("--poll-interval must be at least 1 ms: " + pollInterval);
        }
    }

    private final Path privateDir;
    private final DeviceMemory device;
    private final EngineCatalog catalog;
    private final ModelRegistry registry;
    private final EngineReloader reloader;
    private final EngineMetrics metrics = new EngineMetrics();
    private final ResourceMonitor monitor;
    private final ModelDirectory modelDirectory;
    private final MemoryReader deviceReader;
    private final MemoryReader ramReader;
    private final ScheduledExecutorService background;

    private EngineHost(Settings settings, VmmDriver driver, MemoryReader deviceReader, MemoryReader ramReader) throws IOException {
        this.privateDir = Files.createTempDirectory("vmmkit-engines-");
        this.device = new DeviceMemory(driver);
        this.deviceReader = deviceReader != null ? deviceReader : device::figures;
        this.ramReader = ramReader != null ? ramReader : new HostRamReader();
        EngineLauncher launcher = new EngineLauncher(settings.isolation(), settings.requestTimeout(), privateDir, device);
        this.catalog = new EngineCatalog(settings.enginesDir(), privateDir, LOGGER, launcher::probe);
        this.modelDirectory = new ModelDirectory(settings.modelsDir());
        this.registry = new ModelRegistry(catalog, modelDirectory, device, metrics, LOGGER, launcher,
                settings.idlePolicy(), pauseHostMemory(settings));
        if (settings.idlePolicy() == IdlePolicy.PAUSE && settings.isolation() == Isolation.IN_PROCESS) {
            LOGGER.log(System.Logger.Level.WARNING, "--idle-policy pause needs --isolation worker: engines in this process "
                    + "cannot pause, so idle models are evicted");
        }
        this.reloader = new EngineReloader(catalog, registry, metrics, LOGGER);
        this.monitor = new ResourceMonitor(this.deviceReader, this.ramReader, new MemoryRelief() {
            @Override
            public long clearCaches() {
                return device.drainCaches();
            }

            @Override
            public Optional<String> relieveLeastRecentlyUsedIdle(String reason) {
                return registry.idle().relieveLeastRecentlyUsedIdle(reason, null);
            }
        }, settings.vramThreshold(), settings.ramThreshold(), LOGGER);
        catalog.discover();
        this.background = Executors.newScheduledThreadPool(2, Thread.ofPlatform().daemon().name("vmmkit-engine-", 0).factory());
        long every = settings.pollInterval().toMillis();
        background.scheduleWithFixedDelay(() -> guarded("resource monitor", monitor::pollOnce), every, every, TimeUnit.MILLISECONDS);
        if (settings.watch()) {
            BinaryWatcher watcher = new BinaryWatcher(catalog, reloader, LOGGER);
            background.scheduleWithFixedDelay(() -> guarded("plugin watcher", watcher::pollOnce), every, every, TimeUnit.MILLISECONDS);
        }
    }

    /**
     * Starts a host on {@code driver} (the caller keeps owning it and closes it after the host).
     *
     * @param deviceReader device figures for the monitor, or null for the driver's own
     * @param ramReader    host RAM figures for the monitor, or null for /proc/meminfo and the cgroup
     */
    public static EngineHost start(Settings settings, VmmDriver driver, MemoryReader deviceReader, MemoryReader ramReader)
            throws IOException {
        return new EngineHost(settings, driver, deviceReader, ramReader);
    }

    public static EngineHost start(Settings settings, VmmDriver driver) throws IOException {
        return start(settings, driver, null, null);
    }

    /** The host memory paused models may keep: the setting, or half the host's RAM for auto. */
    private static long pauseHostMemory(Settings settings) {
        if (settings.pauseHostMemoryBytes() != Settings.AUTO_PAUSE_HOST_MEMORY) return settings.pauseHostMemoryBytes();
        return new HostRamReader().read().totalBytes() / 2;
    }

    EngineCatalog catalog() {
        return catalog;
    }

    ModelRegistry registry() {
        return registry;
    }

    EngineReloader reloader() {
        return reloader;
    }

    ResourceMonitor monitor() {
        return monitor;
    }

    EngineMetrics metrics() {
        return metrics;
    }

    /** The Prometheus text of {@code GET /metrics}, with memory figures read now. */
    String metricsText() {
        List<EngineMetrics.ModelRow> rows = registry.models().stream().map(m -> {
            RunningEngine instance = m.instance();
            if (instance == null) return null;
            InstancePause.Paused paused = instance.pausing() == null ? null : instance.pausing().paused();
            return new EngineMetrics.ModelRow(m.name(), instance.manifest().id(), instance.manifest().version(),
                    instance.deviceBytes(), instance.gate().inFlight(), paused != null,
                    paused == null ? 0 : paused.pausedBytes(), paused == null ? 0 : paused.keptBytes());
        }).filter(r -> r != null).toList();
        return metrics.render(deviceReader.read(), ramReader.read(), rows);
    }

    /** The models an installed engine can serve (by format): what {@code /v1/models} and {@code /api/tags} list. */
    List<String> servableModels() {
        java.util.Set<String> formats = new java.util.HashSet<>();
        for (EngineEntry entry : catalog.entries()) {
            if (entry.snapshot() != null) formats.addAll(entry.snapshot().manifest().formats());
        }
        List<String> names = new java.util.ArrayList<>();
        modelDirectory.all().forEach((name, exts) -> {
            if (exts.stream().anyMatch(formats::contains)) names.add(name);
        });
        return names;
    }

    /** True once the engines were scanned and the monitor runs (what {@code GET /ready} tells). */
    boolean ready() {
        return !background.isShutdown();
    }

    /** Stops the background tasks, unloads every model (after its requests), frees device memory. */
    @Override
    public void close() {
        background.shutdownNow();
        try {
            background.awaitTermination(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        registry.closeAll();
        catalog.discardAll();
        device.close();
        deleteTree(privateDir);
    }

    private static void guarded(String task, Runnable body) {
        try {
            body.run();
        } catch (RuntimeException e) {
            LOGGER.log(System.Logger.Level.ERROR, task + " failed: " + e, e);
        }
    }

    private static void deleteTree(Path dir) {
        try (Stream<Path> files = Files.walk(dir)) {
            for (Path file : files.sorted(Comparator.reverseOrder()).toList()) Files.deleteIfExists(file);
        } catch (IOException e) {
            LOGGER.log(System.Logger.Level.WARNING, "cannot delete " + dir + ": " + e);
        }
    }
}
