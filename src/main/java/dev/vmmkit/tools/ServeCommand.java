package dev.vmmkit.tools;

import dev.vmmkit.driver.VmmDriver;
import dev.vmmkit.driver.VmmLog;
import dev.vmmkit.engine.EngineHost;
import dev.vmmkit.engine.EngineHttpServer;
import dev.vmmkit.engine.IdlePolicy;
import dev.vmmkit.engine.Isolation;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

import java.io.IOException;
import java.net.BindException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.util.Optional;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;

/**
 * {@code vmmkit serve}: serves the inference engine plugins under {@code --engines} over HTTP,
 * loading models from {@code --models} on first use (see docs/engine.md). Prints
 * {@code listening on http://127.0.0.1:PORT} once ready and runs until interrupted.
 */
@Command(name = "serve",
        mixinStandardHelpOptions = true,
        description = "Serve native inference engine plugins over HTTP, with hot reload and memory-driven eviction.")
public final class ServeCommand implements Callable<Integer> {
    @Spec
    private CommandSpec spec;

    @Option(names = "--engines", required = true, paramLabel = "DIR",
            description = "Plugin directory: DIR/{engine_id}/{gpu_backend}/manifest.json.")
    private Path engines;

    @Option(names = "--models", required = true, paramLabel = "DIR",
            description = "Model directory: DIR/NAME.EXT (format = EXT), optional DIR/NAME.json {\"architecture\": ...}.")
    private Path models;

    @Option(names = "--port", defaultValue = "8080", paramLabel = "N",
            description = "Port on 127.0.0.1; 0 picks a free one. Default: ${DEFAULT-VALUE}.")
    private int port;

    @Mixin
    private DriverOptions driverOptions;

    @Mixin
    private DeviceMemoryOption deviceMemory;

    @Option(names = "--vram-threshold", defaultValue = "0.9", paramLabel = "FRACTION",
            description = "Evict idle models (least recently used first) past this share of device memory. Default: ${DEFAULT-VALUE}.")
    private double vramThreshold;

    @Option(names = "--ram-threshold", defaultValue = "0.9", paramLabel = "FRACTION",
            description = "Clear caches, then evict idle models, past this share of host RAM. Default: ${DEFAULT-VALUE}.")
    private double ramThreshold;

    @Option(names = "--poll-interval", defaultValue = "1s", paramLabel = "TIME",
            description = "How often memory and plugin files are checked: 1s, 250ms, 2.5s. Default: ${DEFAULT-VALUE}.")
    private String pollInterval;

    @Option(names = "--watch", negatable = true, defaultValue = "true", fallbackValue = "true",
            description = "Reload a plugin on its own when its files change (--no-watch: only on POST). Default: on.")
    private boolean watch;

    @Option(names = "--isolation", defaultValue = "worker", paramLabel = "MODE",
            description = "worker: each model's engine in a process of its own (a crash or hang ends only that worker); "
                    + "in-process: in this process (trusted plugins, no per-call cost). Default: ${DEFAULT-VALUE}.")
    private String isolation;

    @Option(names = "--idle-policy", defaultValue = "evict", paramLabel = "POLICY",
            description = "What happens to the least recently used idle model when device memory runs short. evict: it is "
                    + "unloaded; pause: its device memory is given back and its contents kept in host memory (pinned), so "
                    + "its next request wakes it without loading the file again (--isolation worker). Default: ${DEFAULT-VALUE}.")
    private String idlePolicy;

    @Option(names = "--pause-host-memory", defaultValue = "auto", paramLabel = "SIZE",
            description = "Host memory the paused models' contents may take in all (e.g. 64G); a model whose copy "
                    + "would pass it is evicted instead. auto: half the host's RAM. Default: ${DEFAULT-VALUE}.")
    private String pauseHostMemory;

    @Option(names = "--request-timeout", defaultValue = "300s", paramLabel = "TIME",
            description = "How long one engine call may run before its worker is ended (answer 504; --isolation worker). Default: ${DEFAULT-VALUE}.")
    private String requestTimeout;

    @Option(names = "--bind", defaultValue = "127.0.0.1", paramLabel = "ADDRESS",
            description = "Address to listen on (0.0.0.0 for every interface, as in a container). Default: ${DEFAULT-VALUE}.")
    private String bind;

    @Option(names = "--drain-timeout", defaultValue = "30s", paramLabel = "TIME",
            description = "On SIGTERM: stop accepting, wait this long at most for the requests in flight, unload, exit 0. Default: ${DEFAULT-VALUE}.")
    private String drainTimeout;

    @Override
    public Integer call() throws Exception {
        PrintWriter out = spec.commandLine().getOut();
        for (var folder : java.util.Map.of("--engines", engines, "--models", models).entrySet()) {
            if (!java.nio.file.Files.isDirectory(folder.getValue())) {
                throw new picocli.CommandLine.ParameterException(spec.commandLine(),
                        folder.getKey() + " " + folder.getValue() + ": no such folder");
            }
        }
        // A busy port is found before the host starts, so nothing is logged as available that will never serve.
        Optional<String> busy = portInUse(port);
        if (busy.isPresent()) {
            spec.commandLine().getErr().println("vmmkit serve: " + busy.get());
            spec.commandLine().getErr().flush();
            return VmmkitCli.EXIT_ERROR;
        }
        VmmLog.oneLinePerRecord();
        EngineHost.Settings settings = new EngineHost.Settings(engines, models, vramThreshold, ramThreshold,
                parseDuration(pollInterval, "--poll-interval"), watch, Isolation.parse(isolation),
                parseDuration(requestTimeout, "--request-timeout"), IdlePolicy.parse(idlePolicy),
                pauseHostMemory.trim().equalsIgnoreCase("auto") ? EngineHost.Settings.AUTO_PAUSE_HOST_MEMORY
                        : parsePauseHostMemory(pauseHostMemory));
        VmmDriver driver = openDriver();
        EngineHost host = EngineHost.start(settings, driver);
        java.time.Duration drain = parseDuration(drainTimeout, "--drain-timeout");
        EngineHttpServer server;
        try {
            server = EngineHttpServer.start(host, java.net.InetAddress.getByName(bind), port);
        } catch (BindException e) {   // taken between the check and now
            host.close();
            driver.close();
            throw new IllegalStateException(portInUseMessage(port), e);
        }
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            // SIGTERM (or SIGINT): what a load balancer and Kubernetes expect of a server that is told to go
            System.err.println("vmmkit serve: stopping: no new connections, finishing the requests in flight (at most "
                    + drain.toSeconds() + " s)");
            server.drain(drain);
            host.close();
            driver.close();
            System.err.println("vmmkit serve: stopped");
            stopped.countDown();
            Runtime.getRuntime().halt(0); // a signal's exit status would be 143; a drained stop is a clean one
        }, "vmmkit-serve-shutdown"));
        out.println("listening on http://" + server.address() + ":" + server.port());
        out.flush();
        stopped.await();
        return 0;
    }

    /** Why {@code port} cannot be listened on, when it is taken; empty for a free port or 0 (any free port). */
    static Optional<String> portInUse(int port) {
        if (port == 0) return Optional.empty();
        try (ServerSocket probe = new ServerSocket()) {
            probe.setReuseAddress(true);
            probe.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port));
            return Optional.empty();
        } catch (BindException e) {
            return Optional.of(portInUseMessage(port));
        } catch (IOException e) {
            return Optional.of("--port " + port + ": cannot listen on 127.0.0.1:" + port + " (" + e.getMessage() + ")");
        }
    }

    private static String portInUseMessage(int port) {
        return "--port " + port + ": 127.0.0.1:" + port + " is already in use (another server? --port 0 picks a free one)";
    }

    /** A size of 0 or more (0: nothing is paused; every idle model is evicted). */
    private static long parsePauseHostMemory(String text) {
        try {
            return dev.vmmkit.core.ByteSize.parse(text);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("--pause-host-memory '" + text + "' is not a size or auto (examples: 64G, 512M, auto): "
                    + e.getMessage());
        }
    }

    private VmmDriver openDriver() {
        return driverOptions.open(deviceMemory.bytes());
    }

    /** Reads {@code 1s}, {@code 250ms}, {@code 2.5s} or a plain number of seconds. */
    static Duration parseDuration(String text, String option) {
        String t = text.trim().toLowerCase(java.util.Locale.ROOT);
        try {
            if (t.endsWith("ms")) return Duration.ofMillis(Long.parseLong(t.substring(0, t.length() - 2).trim()));
            String seconds = t.endsWith("s") ? t.substring(0, t.length() - 1).trim() : t;
            return Duration.ofMillis(Math.round(Double.parseDouble(seconds) * 1000));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(option + " '" + text + "' is not a time (examples: 1s, 250ms, 2.5s)");
        }
    }
}
