package dev.vmmkit.engine;

import dev.vmmkit.driver.host.HostDriver;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Prints what the engine host costs (run by scripts/bench-engine.sh; numbers, not assertions):
 * <ol>
 *   <li>one engine_generate of the fixture plugin called directly through FFM, against the same call
 *       through the host's instance (lock, copy-out), the registry (lease) and HTTP (one client);</li>
 *   <li>requests per second over HTTP with 8 clients;</li>
 *   <li>the reload pause: the longest request latency while a shadow reload runs under 8 clients,
 *       against the longest and mean latency before it;</li>
 *   <li>per isolation mode (in process, a worker per instance): the median of lease + generate, of
 *       one HTTP client's round trip and of lease + the streamed call of an answer given whole,
 *       requests/s with 8 clients and the reload pause, then the isolation's cost per generate
 *       (worker median minus in-process median) for both calls;</li>
 *   <li>how long a worker takes to start (to its first frame, model load excluded), and to load.</li>
 * </ol>
 * Arguments: [seconds per phase, default 3].
 */
public final class EngineHostBenchmark {
    private static final int CLIENTS = 8;

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 3;
        Path root = Files.createTempDirectory("vmmkit-engine-bench");
        double[] medians = new double[2];
        double[] wholeMedians = new double[2];
        for (Isolation mode : List.of(Isolation.IN_PROCESS, Isolation.WORKER)) {
            System.out.println("######## isolation: " + mode.name().toLowerCase(Locale.ROOT).replace('_', '-'));
            try (EngineTestBed bed = new EngineTestBed(Files.createDirectories(root.resolve(mode.name())))) {
                Path plugin = bed.install("fixture", "1.0.0", "fixture-v1.so", "\"fx\"", "");
                bed.model("a.fx", 1 << 20);
                bed.model("b.fx", 1 << 20);
                if (mode == Isolation.WORKER) bed.workers(EngineHost.Settings.DEFAULT_REQUEST_TIMEOUT);
                bed.start();
                if (mode == Isolation.IN_PROCESS) directCalls(bed, seconds);
                medians[mode.ordinal()] = medians(bed, seconds);
                wholeMedians[mode.ordinal()] = wholeAnswerMedian(bed, seconds);
                throughput(bed, seconds);
                reloadPause(bed, plugin, seconds);
            }
        }
        System.out.printf(Locale.ROOT, "isolation cost per generate (p50, lease + call): %.1f us%n",
                (medians[Isolation.WORKER.ordinal()] - medians[Isolation.IN_PROCESS.ordinal()]) / 1000);
        System.out.printf(Locale.ROOT, "isolation cost per generate (p50, lease + streamed call for a whole answer): %.1f us%n",
                (wholeMedians[Isolation.WORKER.ordinal()] - wholeMedians[Isolation.IN_PROCESS.ordinal()]) / 1000);
        workerStart(root);
    }

    /** Medians of lease + generate and of one HTTP client; returns the first in ns. */
    private static double medians(EngineTestBed bed, double seconds) {
        System.out.println("== per generate, median");
        double lease = median(seconds, () -> {
            try (ModelRegistry.Lease l = bed.host().registry().acquire("a")) {
                l.instance().generate("hello");
            }
        });
        print("p50 lease + generate", lease);
        print("p50 HTTP, one client", median(seconds / 3, () -> bed.generate("a", "hello")));
        return lease;
    }

    /**
     * Median of lease + the streamed call an HTTP request for a whole answer makes (engine_generate_stream
     * with a sink that is not live), in ns.
     */
    private static double wholeAnswerMedian(EngineTestBed bed, double seconds) {
        Generation.Sink sink = Generation.Sink.atEnd(token -> true);
        double whole = median(seconds, () -> {
            try (ModelRegistry.Lease l = bed.host().registry().acquire("a")) {
                l.instance().stream("hello", "{}", sink);
            }
        });
        print("p50 lease + stream (whole answer)", whole);
        return whole;
    }

    /** A worker's start to its first frame (JVM and channel, no model), and to a loaded model. */
    private static void workerStart(Path root) throws Exception {
        System.out.println("== worker start (" + 7 + " starts, median)");
        Path privateDir = Files.createDirectories(root.resolve("start"));
        long[] ready = new long[7];
        for (int i = 0; i < ready.length; i++) {
            long t0 = System.nanoTime();
            WorkerProcess worker = WorkerProcess.start("bench", privateDir, "host", java.time.Duration.ofSeconds(60), death -> { });
            ready[i] = System.nanoTime() - t0;
            worker.close();
        }
        java.util.Arrays.sort(ready);
        System.out.printf(Locale.ROOT, "worker start to ready: median %.0f ms (min %.0f, max %.0f)%n",
                ready[ready.length / 2] / 1e6, ready[0] / 1e6, ready[ready.length - 1] / 1e6);
    }

    /** Median nanoseconds per call of {@code body} over about {@code seconds}, after a warm-up. */
    private static double median(double seconds, Runnable body) {
        for (int i = 0; i < 2000; i++) body.run();
        long[] samples = new long[1 << 20];
        int n = 0;
        long deadline = System.nanoTime() + (long) (seconds * 1e9);
        long now = System.nanoTime();
        while (now < deadline && n < samples.length) {
            body.run();
            long after = System.nanoTime();
            samples[n++] = after - now;
            now = after;
        }
        long[] taken = java.util.Arrays.copyOf(samples, n);
        java.util.Arrays.sort(taken);
        return taken[n / 2];
    }

    private static void directCalls(EngineTestBed bed, double seconds) throws Exception {
        System.out.println("== per generate (fixture plugin, 2 tokens), mean over the phase");
        EngineManifest manifest = EngineManifest.read(bed.engines.resolve("fixture/cpu"));
        Path privateDir = Files.createTempDirectory("vmmkit-engine-bench-direct");
        PluginSnapshot snapshot = PluginSnapshot.take(manifest, privateDir, PluginProbe.IN_PROCESS);
        try (HostDriver driver = HostDriver.open(); DeviceMemory device = new DeviceMemory(driver);
             Arena arena = Arena.ofConfined()) {
            // The plugin on its own: a private copy, initialised and loaded by hand, called through FFM.
            PluginLibrary library = PluginLibrary.open(snapshot.staged(), privateDir, manifest);
            InstanceMemory memory = new InstanceMemory(device.resource());
            EngineCallbacks callbacks = new EngineCallbacks(memory, -1, null, EngineHost.LOGGER, "bench");
            library.init(callbacks.config());
            library.loadModel(arena.allocateFrom(bed.models.resolve("a.fx").toString()));
            MemorySegment prompt = arena.allocateFrom("hello");
            MemorySegment out = arena.allocate(ValueLayout.ADDRESS);
            double raw = time(seconds, () -> library.generate(prompt, out));
            print("direct FFM call (no copy)", raw);
            library.shutdown();
            memory.freeAll();
            library.close();
            callbacks.close();

            EngineInstance instance = EngineInstance.start(snapshot, privateDir, device.resource(), -1,
                    EngineHost.LOGGER, "a", bed.models.resolve("a.fx"));
            double host = time(seconds, () -> instance.generate("hello"));
            instance.close();
            print("host instance (lock + copy-out)", host);
            double lease = time(seconds, () -> {
                try (ModelRegistry.Lease l = bed.host().registry().acquire("a")) {
                    l.instance().generate("hello");
                }
            });
            print("host registry (lease + call)", lease);
            System.out.printf(Locale.ROOT, "host overhead per generate in process: %.2f us%n", (lease - raw) / 1000);
        } finally {
            snapshot.discard();
        }
    }

    private static void throughput(EngineTestBed bed, double seconds) throws Exception {
        System.out.println("== " + CLIENTS + " HTTP clients");
        Load load = new Load(bed);
        Thread.sleep((long) (seconds * 1000));
        Load.Result result = load.stop();
        System.out.printf(Locale.ROOT, "requests/s: %.0f (%d requests, %d failed, mean %.0f us, max %.0f us)%n",
                result.count / result.seconds, result.count, result.failed, result.meanMicros(), result.maxMicros());
    }

    private static void reloadPause(EngineTestBed bed, Path plugin, double seconds) throws Exception {
        System.out.println("== reload pause under " + CLIENTS + " clients");
        Load before = new Load(bed);
        Thread.sleep((long) (seconds * 1000));
        Load.Result steady = before.stop();
        Load during = new Load(bed);
        Thread.sleep(100);
        long start = System.nanoTime();
        EngineTestBed.Answer answer = bed.post("/api/engines/fixture/reload", "");
        long reloadMicros = (System.nanoTime() - start) / 1000;
        Thread.sleep(100);
        Load.Result reloading = during.stop();
        System.out.printf(Locale.ROOT, "reload: HTTP %d in %d us (%s)%n", answer.status(), reloadMicros,
                answer.status() == 200 ? "2 models switched" : answer.text());
        System.out.printf(Locale.ROOT, "latency before: mean %.0f us, max %.0f us; around the reload: mean %.0f us, max %.0f us; failed %d%n",
                steady.meanMicros(), steady.maxMicros(), reloading.meanMicros(), reloading.maxMicros(), reloading.failed);
        System.out.printf(Locale.ROOT, "reload pause (max during / max before): %.1fx%n", reloading.maxMicros() / steady.maxMicros());
    }

    /** Mean nanoseconds per call of {@code body} over about {@code seconds}, after a warm-up. */
    private static double time(double seconds, Runnable body) {
        for (int i = 0; i < 2000; i++) body.run();
        long calls = 0;
        long deadline = System.nanoTime() + (long) (seconds * 1e9);
        long start = System.nanoTime();
        long now;
        do {
            for (int i = 0; i < 100; i++) body.run();
            calls += 100;
            now = System.nanoTime();
        } while (now < deadline);
        return (double) (now - start) / calls;
    }

    private static void print(String what, double nanos) {
        System.out.printf(Locale.ROOT, "%-34s %10.2f us%n", what, nanos / 1000);
    }

    /** Eight clients calling generate in a loop, alternating two models, until stopped. */
    private static final class Load {
        record Result(long count, long failed, long totalNanos, long maxNanos, double seconds) {
            double meanMicros() {
                return count == 0 ? 0 : totalNanos / 1000.0 / count;
            }

            double maxMicros() {
                return maxNanos / 1000.0;
            }
        }

        private final AtomicBoolean stop = new AtomicBoolean();
        private final AtomicLong count = new AtomicLong();
        private final AtomicLong failed = new AtomicLong();
        private final AtomicLong total = new AtomicLong();
        private final AtomicLong max = new AtomicLong();
        private final List<Thread> clients = new ArrayList<>();
        private final long start = System.nanoTime();

        Load(EngineTestBed bed) {
            for (int c = 0; c < CLIENTS; c++) {
                String model = c % 2 == 0 ? "a" : "b";
                clients.add(Thread.ofPlatform().start(() -> {
                    while (!stop.get()) {
                        long t0 = System.nanoTime();
                        int status = bed.generate(model, "hello").status();
                        long took = System.nanoTime() - t0;
                        count.incrementAndGet();
                        total.addAndGet(took);
                        max.accumulateAndGet(took, Math::max);
                        if (status != 200) failed.incrementAndGet();
                    }
                }));
            }
        }

        Result stop() throws InterruptedException {
            stop.set(true);
            for (Thread client : clients) client.join();
            return new Result(count.get(), failed.get(), total.get(), max.get(), (System.nanoTime() - start) / 1e9);
        }
    }
}
