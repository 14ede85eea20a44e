package dev.vmmkit.interpose;

import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.ProcessResult;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.stream.Stream;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The whole native path: {@code vmmkit run --driver host} (a separate java process, as a user runs it)
 * preloads the shim into {@code alloc_test}, a C program linked against the stand-in runtime
 * {@code libcudart.so} (src/test/c). Every run goes through the real allocator (VmmManager over the
 * host driver), which is part of every build: if it cannot be made, the tests fail. The first two
 * tests also run over a test-only bump allocator ({@value #PLUMBING_ONLY}), which checks the shim's
 * plumbing (the resource chosen by a setting, errors carried back to the program) and nothing of
 * vmmkit's allocator.
 */
class InterposeEndToEndTest {
    private static final Path NATIVE = Path.of("target", "test-native").toAbsolutePath();
    private static final Path ALLOC_TEST = NATIVE.resolve("alloc_test");
    private static final Path RESIZE_TEST = NATIVE.resolve("resize_test");
    private static final Path PAUSE_TEST = NATIVE.resolve("pause_test");
    private static final List<String> ALL = List.of("basic", "errors", "devices", "foreign", "threads", "fork", "torch",
            "by_handle", "peer", "device_threads", "torch_threads");
    private static final Set<String> STATS_KEYS = Set.of("mode", "complete", "allocs", "frees", "passthrough_calls",
            "peak_live_bytes", "peak_reserved_bytes", "fragmentation_ratio", "zero_copy", "profile", "devices");
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String REAL = "real";
    private static final String PLUMBING_ONLY = "plumbing only (test-only bump allocator)";

    @TempDir
    Path dir;


    /** Runs {@code vmmkit run ARGS} in a new JVM, the embedded JVM loading {@code allocator}'s classes. */
    private ProcessResult vmmkitRun(String allocator, Map<String, String> extraEnv, String... args)
            throws IOException, InterruptedException {
        Map<String, String> env = new HashMap<>();
        if (allocator.equals(PLUMBING_ONLY)) {
            env.put("VMMKIT_JVM_OPTS", "-D" + ResourceFactory.PROPERTY + "=" + BumpResourceFactory.class.getName());
        } else {
            assertEquals(REAL, allocator);
        }
        env.putAll(extraEnv);
        return VmmkitRunCommand.run(VmmkitRunCommand.of(args), env, dir);
    }

    private static void assertScenariosPassed(ProcessResult result, List<String> scenarios) {
        assertEquals(0, result.exitCode(), result::toString);
        for (String scenario : scenarios) assertTrue(result.stdout().contains("ok " + scenario + "\n"), result::toString);
    }

    private JsonNode stats(Path file) throws IOException {
        JsonNode stats = JSON.readTree(file.toFile());
        Set<String> keys = new TreeSet<>();
        stats.fieldNames().forEachRemaining(keys::add);
        assertEquals(new TreeSet<>(STATS_KEYS), keys);
        return stats;
    }

    /**
     * Checks the trace's lines and returns the number of allocs; every free pairs with an earlier
     * alloc, and a cudaFree's completion (on the device-wide stream) with its earlier request.
     */
    private static long checkTrace(Path file) throws IOException {
        List<String> lines = Files.readAllLines(file);
        assertTrue(lines.getFirst().startsWith("# action,addr,size,stream"), lines.getFirst());
        Map<Long, Long> live = new HashMap<>();
        Map<Long, Integer> cudaFreesWaiting = new HashMap<>();
        long allocs = 0;
        for (String line : lines.subList(1, lines.size())) {
            String[] f = line.split(",");
            assertEquals(4, f.length, line);
            long address = Long.parseLong(f[1]), size = Long.parseLong(f[2]);
            boolean cudaFree = Long.parseUnsignedLong(f[3]) == DeviceMemoryResource.DEVICE_WIDE_STREAM;
            switch (f[0]) {
                case "alloc" -> {
                    assertFalse(live.containsKey(address), "allocated twice: " + line);
                    live.put(address, size);
                    allocs++;
                }
                case "free_requested" -> {
                    assertEquals(live.get(address), size, line);
                    if (cudaFree) {
                        live.remove(address);
                        cudaFreesWaiting.merge(address, 1, Integer::sum);
                    }
                }
                case "free_completed" -> {
                    if (cudaFree) assertTrue(cudaFreesWaiting.merge(address, -1, Integer::sum) >= 0, "completed first: " + line);
                    else assertEquals(size, live.remove(address), line);
                }
                default -> throw new AssertionError("unknown action: " + line);
            }
        }
        assertTrue(live.isEmpty(), "never freed: " + live.keySet());
        assertTrue(cudaFreesWaiting.values().stream().allMatch(n -> n == 0), "cudaFrees never completed: " + cudaFreesWaiting);
        return allocs;
    }

    @ParameterizedTest
    @ValueSource(strings = {REAL, PLUMBING_ONLY})
    void vmmModeServesEveryScenarioWithoutTheRuntimesAllocator(String allocator) throws Exception {
        Path stats = dir.resolve("stats.json"), trace = dir.resolve("trace.csv");
        ProcessResult result = vmmkitRun(allocator, Map.of("VMM_LOG", "info"), "--driver", "host",
                "--stats", stats.toString(), "--trace", trace.toString(), "--", ALLOC_TEST.toString(), "all");
        assertScenariosPassed(result, ALL);
        assertTrue(result.stderr().contains("vmm mode ready in"), result::toString);
        // The program's first CUDA call is an allocation: vmmkit starts at it, not early.
        assertFalse(result.stderr().contains("started early"), result::toString);
        JsonNode s = stats(stats);
        assertEquals("vmm", s.get("mode").asText());
        assertTrue(s.get("complete").asBoolean(), s::toString);
        assertTrue(s.get("allocs").asLong() > 16_000, s::toString);
        assertEquals(s.get("allocs").asLong(), s.get("frees").asLong(), s::toString);
        // foreign: 2 frees of the stand-in's own memory; errors: one double free.
        assertTrue(s.get("passthrough_calls").asLong() >= 3, s::toString);
        assertTrue(s.get("peak_reserved_bytes").asLong() >= s.get("peak_live_bytes").asLong(), s::toString);
        assertEquals(s.get("allocs").asLong(), checkTrace(trace));
    }

    @ParameterizedTest
    @ValueSource(strings = {REAL, PLUMBING_ONLY})
    void outOfMemoryIsTheRuntimesErrorAndFreeingRecovers(String allocator) throws Exception {
        ProcessResult result = vmmkitRun(allocator, Map.of("VMM_DEVICE_MEMORY", "64M"), "--driver", "host",
                "--", ALLOC_TEST.toString(), "oom");
        assertScenariosPassed(result, List.of("oom"));
    }

    /**
     * A CUDA graph capture through the stand-in runtime: the shim tells vmmkit, which synchronises
     * for earlier frees as the capture begins and none while it runs (alloc_test's "capture").
     */
    @Test
    void aStreamCaptureHoldsDeviceSynchronisationsBackWithoutBlockingTheProgram() throws Exception {
        ProcessResult result = vmmkitRun(REAL, Map.of("VMM_DEVICE_MEMORY", "64M"), "--driver", "host",
                "--", ALLOC_TEST.toString(), "capture");
        assertScenariosPassed(result, List.of("capture"));
    }

    /**
     * Two processes: alloc_test exports a vmmkit allocation, a second alloc_test (its own JVM) imports
     * it on device 1 and reads it; the first frees it and allocates more, and the importer's bytes
     * stay; then bad handles. The stats file reports each device.
     */
    @Test
    void ipcBetweenTwoProcessesAndPerDeviceStats() throws Exception {
        String why = dev.vmmkit.ipc.IpcImports.whyDescriptorsCannotBeTaken();
        assumeTrue(why == null, "IPC needs pidfd_getfd, which this machine refuses: " + why);
        Path stats = dir.resolve("stats.json");
        ProcessResult result = vmmkitRun(REAL, Map.of(), "--driver", "host", "--stats", stats.toString(), "--",
                ALLOC_TEST.toString(), "ipc", "ipc_errors", "devices", "peer");
        assertScenariosPassed(result, List.of("ipc", "ipc_errors", "devices", "peer"));
        JsonNode s = stats(stats);
        JsonNode devices = s.get("devices");
        assertEquals(2, devices.size(), s::toString);
        long allocs = 0;
        for (int i = 0; i < 2; i++) {
            JsonNode device = devices.get(i);
            assertEquals(i, device.get("device").asInt(), s::toString);
            assertEquals(0, device.get("live_bytes").asLong(), s::toString);
            assertTrue(device.get("peers").isArray() && device.get("peers").isEmpty(), "peer access was disabled: " + s);
            allocs += device.get("allocs").asLong();
        }
        assertEquals(s.get("allocs").asLong(), allocs, s::toString);
    }

    /**
     * A program of two CUDA processes (as torchrun's ranks): the stats file holds both processes'
     * figures, each as the process alone would report them, and each process's requests are a
     * trace of their own, none lost to the other's.
     */
    @Test
    void twoProcessesOfOneProgramEachKeepTheirFiguresAndTheirTrace() throws Exception {
        Map<String, Long> alone = new HashMap<>();
        for (String scenario : List.of("basic", "threads")) {
            Path stats = dir.resolve(scenario + ".json");
            ProcessResult result = vmmkitRun(REAL, Map.of(), "--driver", "host", "--profile", "off", "--stats",
                    stats.toString(), "--", ALLOC_TEST.toString(), scenario);
            assertScenariosPassed(result, List.of(scenario));
            alone.put(scenario, stats(stats).get("allocs").asLong());
        }
        Path stats = dir.resolve("stats.json"), trace = dir.resolve("trace.csv");
        ProcessResult result = vmmkitRun(REAL, Map.of(), "--driver", "host", "--profile", "off", "--stats", stats.toString(),
                "--trace", trace.toString(), "--", "sh", "-c", ALLOC_TEST + " basic & " + ALLOC_TEST + " threads; wait");
        assertScenariosPassed(result, List.of("basic", "threads"));
        JsonNode s = JSON.readTree(stats.toFile());
        assertTrue(s.get("complete").asBoolean(), s::toString);
        assertEquals(alone.get("basic") + alone.get("threads"), s.get("allocs").asLong(), s::toString);
        JsonNode processes = s.get("processes");
        assertEquals(2, processes.size(), s::toString);
        Set<Long> pids = new TreeSet<>();
        List<Long> allocs = new ArrayList<>();
        for (JsonNode process : processes) {
            pids.add(process.get("pid").asLong());
            allocs.add(process.get("allocs").asLong());
        }
        assertEquals(2, pids.size(), s::toString);
        assertEquals(new TreeSet<>(alone.values()), new TreeSet<>(allocs), "each process's own figures: " + s);
        for (JsonNode device : s.get("devices")) assertTrue(pids.contains(device.get("pid").asLong()), s::toString);
        // The process with more requests keeps the trace's path; the other's has its pid in the name.
        long larger = Math.max(alone.get("basic"), alone.get("threads"));
        long smaller = Math.min(alone.get("basic"), alone.get("threads"));
        assertEquals(larger, checkTrace(trace));
        List<Path> others;
        try (Stream<Path> files = Files.list(dir)) {
            others = files.filter(f -> f.getFileName().toString().matches("trace\\.\\d+\\.csv")).toList();
        }
        assertEquals(1, others.size(), others::toString);
        assertTrue(pids.contains(Long.parseLong(others.getFirst().getFileName().toString().split("\\.")[1])), others::toString);
        assertEquals(smaller, checkTrace(others.getFirst()));
        assertTrue(result.stderr().contains("2 processes recorded requests"), result::toString);
    }

    /** Threads on devices 0 and 1 freeing after cudaSetDevice to the other: each device's allocator serves its own. */
    @Test
    void eachDeviceHasItsOwnAllocatorAndFreesFindIt() throws Exception {
        Path stats = dir.resolve("stats.json");
        ProcessResult result = vmmkitRun(REAL, Map.of(), "--driver", "host", "--stats", stats.toString(), "--",
                ALLOC_TEST.toString(), "device_threads");
        assertScenariosPassed(result, List.of("device_threads"));
        JsonNode devices = stats(stats).get("devices");
        assertEquals(2, devices.size(), devices::toString);
        for (int i = 0; i < 2; i++) {
            JsonNode device = devices.get(i);
            assertEquals(i, device.get("device").asInt());
            assertEquals(3 * 500, device.get("allocs").asLong(), devices::toString);
            assertEquals(3 * 500, device.get("frees").asLong(), devices::toString);
            assertEquals(0, device.get("live_bytes").asLong(), devices::toString);
        }
    }

    @Test
    void monitorModePassesEverythingThroughAndRecords() throws Exception {
        Path stats = dir.resolve("stats.json"), trace = dir.resolve("trace.csv");
        ProcessResult result = vmmkitRun(REAL, Map.of(), "--mode", "monitor", "--driver", "host",
                "--stats", stats.toString(), "--trace", trace.toString(), "--", ALLOC_TEST.toString(), "all");
        assertScenariosPassed(result, ALL);
        JsonNode s = stats(stats);
        assertEquals("monitor", s.get("mode").asText());
        assertTrue(s.get("allocs").asLong() > 16_000, s::toString);
        assertEquals(s.get("allocs").asLong(), s.get("frees").asLong(), s::toString);
        assertTrue(s.get("passthrough_calls").asLong() >= 2 * s.get("allocs").asLong(), s::toString);
        assertTrue(s.get("peak_reserved_bytes").isNull() && s.get("fragmentation_ratio").isNull(), s::toString);
        assertEquals(s.get("allocs").asLong(), checkTrace(trace));
    }

    @Test
    void monitorModeWithNothingToRecordStartsNoJvm() throws Exception {
        ProcessResult result = vmmkitRun(REAL, Map.of("VMM_LOG", "info"), "--mode", "monitor",
                "--", ALLOC_TEST.toString(), "basic", "foreign");
        assertScenariosPassed(result, List.of("basic", "foreign"));
        assertFalse(result.stderr().contains("ready in"), result::toString);
    }

    /** A jar that is not there; a heap the JVM refuses (HotSpot would end the process: the shim must not let it). */
    @ParameterizedTest
    @ValueSource(strings = {"missing-jar", "heap-too-small"})
    void aJvmThatCannotStartLeavesTheProgramOnTheRuntime(String failure) throws Exception {
        Map<String, String> env = failure.equals("missing-jar")
                ? Map.of("VMMKIT_JAR", dir.resolve("missing.jar").toString())
                : Map.of("VMMKIT_JVM_OPTS", "-Xmx1k");
        ProcessResult result = vmmkitRun(REAL, env, "--", ALLOC_TEST.toString(), "errors", "foreign");
        assertScenariosPassed(result, List.of("errors", "foreign"));
        assertTrue(result.stderr().contains("passing every CUDA call through"), result::toString);
    }

    /** The seed's pattern with VMM_ZERO_COPY=1: the whole-buffer copies become remaps and never reach the runtime. */
    @Test
    void wholeBufferCopiesBecomeRemapsThatNeverReachTheRuntime() throws Exception {
        Path stats = dir.resolve("stats.json");
        ProcessResult result = vmmkitRun(REAL, Map.of("VMM_ZERO_COPY", "1", "EXPECT_NO_RUNTIME_COPIES", "1"),
                "--driver", "host", "--stats", stats.toString(), "--", RESIZE_TEST.toString(), "pattern");
        assertScenariosPassed(result, List.of("pattern"));
        JsonNode zeroCopy = stats(stats).get("zero_copy");
        assertEquals(15, zeroCopy.get("remaps").asLong(), zeroCopy::toString);
        assertEquals(0, zeroCopy.get("copies_fallen_back").asLong(), zeroCopy::toString);
        long bytes = 3 * (4 + 6 + 64) * (1L << 20) + 3 * (long) (40.5 * (1 << 20)) + 3 * (long) (1.5 * (1 << 20));
        assertEquals(bytes, zeroCopy.get("bytes").asLong(), zeroCopy::toString);
    }

    /** Without the opt-in every copy goes to the runtime, with the same data. */
    @Test
    void withoutTheOptInCopiesStayCopies() throws Exception {
        Path stats = dir.resolve("stats.json");
        ProcessResult result = vmmkitRun(REAL, Map.of(), "--driver", "host", "--stats", stats.toString(),
                "--", RESIZE_TEST.toString(), "pattern", "4");
        assertScenariosPassed(result, List.of("pattern"));
        assertEquals(0, stats(stats).get("zero_copy").get("remaps").asLong());
    }

    /** vmmkit_realloc: grows in place, moves by remap, shrinks in place, refuses what it must. */
    @Test
    void vmmkitReallocKeepsTheContentsAndRefusesForeignPointers() throws Exception {
        Path stats = dir.resolve("stats.json");
        ProcessResult result = vmmkitRun(REAL, Map.of(), "--driver", "host", "--stats", stats.toString(),
                "--", RESIZE_TEST.toString(), "realloc");
        assertScenariosPassed(result, List.of("realloc"));
        JsonNode zeroCopy = stats(stats).get("zero_copy");
        assertEquals(1, zeroCopy.get("remaps").asLong(), zeroCopy::toString);
        assertEquals(0, zeroCopy.get("copies_fallen_back").asLong(), "no copy at all, not even the emulation's");
    }

    /**
     * A pause and a resume while the program records a CUDA graph (a stream capture) are refused
     * with cudaErrorStreamCaptureUnsupported, with nothing done and the reason on standard error;
     * once the capture has ended both work.
     */
    @Test
    void pauseAndResumeDuringAStreamCaptureAreRefusedAndWorkAfterIt() throws Exception {
        ProcessResult result = vmmkitRun("real", Map.of("VMM_DEVICE_MEMORY", "64M"), "--driver", "host",
                "--", PAUSE_TEST.toString(), "capture");
        assertScenariosPassed(result, List.of("capture"));
        assertTrue(result.stderr().contains("pause of memory tag 'kv_cache' on device 0 refused: a CUDA stream capture is under way"),
                result.toString());
    }

    /**
     * A C program tags weights (kept) and a KV cache (discarded) on a 64 MiB emulated device, pauses
     * both, lets another phase allocate most of the device, resumes, and finds the weights intact at
     * the same addresses; the stats file reports each tag's pause and resume.
     */
    @Test
    void pausedTagsGiveTheirMemoryToAnotherPhaseAndComeBackAtTheSameAddresses() throws Exception {
        Path stats = dir.resolve("stats.json");
        ProcessResult result = vmmkitRun("real", Map.of("VMM_DEVICE_MEMORY", "64M"), "--driver", "host",
                "--stats", stats.toString(), "--", PAUSE_TEST.toString(), "weights-kv", "64");
        assertScenariosPassed(result, List.of("weights-kv"));
        assertTrue(result.stderr().contains("memory tag 'weights' is paused"), result.toString());
        JsonNode device = stats(stats).get("devices").get(0);
        assertEquals(0, device.get("paused_bytes").asLong(), "nothing paused at the exit");
        JsonNode weights = device.get("tags").get(0), cache = device.get("tags").get(1);
        assertEquals("weights", weights.get("tag").asText());
        assertEquals(2, weights.get("pauses").asLong());
        assertEquals(2, weights.get("resumes").asLong());
        assertTrue(weights.get("kept_bytes").asLong() > 8L << 20, weights.toString());
        assertEquals("kv_cache", cache.get("tag").asText());
        assertEquals(1, cache.get("pauses").asLong());
        assertEquals(0, cache.get("kept_bytes").asLong());
    }

    /**
     * A C program under `vmmkit run` sets a default tag: its allocations outside regions, another
     * thread's included, are paused at once, an untagged region's are not, and the stats file lists
     * the default tag as any tag.
     */
    @Test
    void theDefaultTagPausesEveryAllocationOutsideRegionsOnEveryThread() throws Exception {
        Path stats = dir.resolve("stats.json");
        ProcessResult result = vmmkitRun(REAL, Map.of("VMM_DEVICE_MEMORY", "64M"), "--driver", "host",
                "--stats", stats.toString(), "--", PAUSE_TEST.toString(), "default-tag");
        assertScenariosPassed(result, List.of("default-tag"));
        assertTrue(result.stderr().contains("memory tag 'default' is paused"), result.toString());
        JsonNode tag = stats(stats).get("devices").get(0).get("tags").get(0);
        assertEquals("default", tag.get("tag").asText());
        assertEquals(2, tag.get("pauses").asLong(), tag::toString);
        assertTrue(tag.get("kept_bytes").asLong() >= 5L << 20, tag::toString);
    }

    @Test
    void runReturnsTheProgramsExitCode() throws Exception {
        ProcessResult result = vmmkitRun(REAL, Map.of(), "--", "sh", "-c", "echo \"$LD_PRELOAD\"; exit 7");
        assertEquals(7, result.exitCode(), result::toString);
        assertTrue(result.stdout().contains("libvmmkit_preload.so"), result::toString);
    }

    /** A program that loads the shim with dlopen, as PyTorch loads a pluggable allocator: no LD_PRELOAD. */
    @Test
    void aShimLoadedWithDlopenStartsAtLoadAndServesThePluggablePair() throws Exception {
        Map<String, String> env = new HashMap<>(VmmkitRunCommand.dlopened());
        env.put("VMM_LOG", "info");
        ProcessResult result = VmmkitRunCommand.run(List.of(ALLOC_TEST.toString(), "pluggable"), env, dir);
        assertScenariosPassed(result, List.of("pluggable"));
        assertTrue(result.stderr().contains("vmm mode ready in"), result::toString);
        try (var profiles = Files.list(profileCache())) {
            assertEquals(1, profiles.filter(f -> f.toString().endsWith(".json")).count(), "without vmmkit run, the peak profile is kept too");
        }
    }

    @Test
    void benchmarkRuns() throws Exception {
        ProcessResult result = vmmkitRun(REAL, Map.of(), "--driver", "host", "--",
                NATIVE.resolve("bench_pair").toString(), "4096", "2000");
        assertEquals(0, result.exitCode(), result::toString);
        JsonNode figures = JSON.readTree(result.stdout());
        assertTrue(figures.get("pair_median_ns").asDouble() > 0, result::toString);
        Set<String> seen = new HashSet<>();
        figures.fieldNames().forEachRemaining(seen::add);
        assertTrue(seen.contains("first_call_ms"), result::toString);
    }

    /**
     * PyTorch's pluggable-allocator entry points, on the default stream and on a stream of the
     * program's own: after the first allocation, half a million cache-hit pairs make no driver call
     * at all (no event record or query per free), and the stats file says so per device.
     */
    @ParameterizedTest
    @ValueSource(strings = {"0", "0x1234"})
    void cacheHitPairsThroughThePluggableEntryPointsMakeNoDriverCall(String stream) throws Exception {
        Path stats = dir.resolve("stats.json");
        ProcessResult result = vmmkitRun(REAL, Map.of(), "--driver", "host", "--stats", stats.toString(), "--",
                NATIVE.resolve("bench_pair").toString(), "4096", "2000", "torch", stream);
        assertEquals(0, result.exitCode(), result::toString);
        assertTrue(JSON.readTree(result.stdout()).get("pair_median_ns").asDouble() > 0, result::toString);
        JsonNode device = stats(stats).get("devices").get(0);
        assertTrue(device.get("allocs").asLong() > 500_000, device::toString);
        // Each free reached Java before the next allocation (riding on its upcall): never two live.
        assertEquals(4096, device.get("peak_live_bytes").asLong(), device::toString);
        assertEquals(1, device.get("cache_misses").asLong(), device::toString);
        assertEquals(device.get("allocs").asLong() - 1, device.get("cache_hits").asLong(), device::toString);
        long calls = 0;
        for (JsonNode count : device.get("driver_calls")) calls += count.asLong();
        // The first allocation: reserve the two regions, memory_info, create + map + set_access one handle.
        assertTrue(calls <= 8, "driver calls after the first allocation: " + device);
        device.get("driver_calls").fieldNames().forEachRemaining(call ->
                assertFalse(call.startsWith("event_") || call.equals("device_synchronize"), device::toString));
    }

    @Test
    void aProgramWithoutCudaCallsStillGetsAStatsFileWithZeroCounts() throws Exception {
        Path stats = dir.resolve("stats.json");
        Files.writeString(stats, "{\"mode\":\"vmm\",\"allocs\":99}"); // an older run's
        ProcessResult result = vmmkitRun(REAL, Map.of(), "--stats", stats.toString(), "--", "true");
        assertEquals(0, result.exitCode(), result::toString);
        JsonNode s = stats(stats);
        assertTrue(s.get("complete").asBoolean(), s::toString);
        assertEquals(0, s.get("allocs").asLong(), s::toString);
        assertEquals(0, s.get("peak_live_bytes").asLong(), s::toString);
    }

    @Test
    void aProgramKilledBySignalLeavesAStatsFileMarkedIncomplete() throws Exception {
        Path stats = dir.resolve("stats.json"), trace = dir.resolve("trace.csv");
        Files.writeString(stats, "{\"mode\":\"vmm\",\"allocs\":99}");
        Files.writeString(trace, "alloc,1,2,0\n");
        ProcessResult result = vmmkitRun(REAL, Map.of(), "--driver", "host", "--stats", stats.toString(),
                "--trace", trace.toString(), "--", ALLOC_TEST.toString(), "basic", "die");
        assertEquals(128 + 15, result.exitCode(), result::toString);
        JsonNode s = stats(stats);
        assertFalse(s.get("complete").asBoolean(), s::toString);
        assertTrue(s.get("allocs").isNull(), s::toString);
        assertTrue(result.stderr().contains("\"complete\": false"), result::toString);
        assertFalse(Files.exists(trace), "the older trace must not pass for this run's");
    }

    @ParameterizedTest
    @ValueSource(strings = {"stats", "trace"})
    void aStatsOrTracePathThatCannotBeWrittenStopsBeforeTheProgramStarts(String option) throws Exception {
        Path bad = dir.resolve("no-such-folder").resolve("out.json");
        Path started = dir.resolve("started");
        ProcessResult result = vmmkitRun(REAL, Map.of(), "--" + option, bad.toString(), "--",
                "touch", started.toString());
        assertEquals(2, result.exitCode(), result::toString);
        assertTrue(result.stderr().contains(bad.toString()), result::toString);
        assertFalse(result.stderr().contains("cannot load vmmkit"), result::toString);
        assertFalse(Files.exists(started), "the program must not start");
    }

    @Test
    void aBarePreloadWithAnUnwritableTraceWarnsAndKeepsVmmkit() throws Exception {
        Path bad = dir.resolve("no-such-folder").resolve("trace.csv");
        Path stats = dir.resolve("stats.json");
        ProcessResult result = vmmkitRun(REAL, Map.of(), "--driver", "host", "--stats", stats.toString(), "--",
                "env", "VMM_TRACE_FILE=" + bad, ALLOC_TEST.toString(), "basic");
        assertScenariosPassed(result, List.of("basic"));
        assertTrue(result.stderr().contains("cannot write the trace " + bad), result::toString);
        assertFalse(result.stderr().contains("cannot load vmmkit"), result::toString);
        assertTrue(stats(stats).get("allocs").asLong() > 0);
    }

    @Test
    void htmlWritesTheMemoryReportOfTheRun() throws Exception {
        Path html = dir.resolve("report.html");
        ProcessResult result = vmmkitRun(REAL, Map.of(), "--driver", "host", "--html", html.toString(), "--",
                ALLOC_TEST.toString(), "basic");
        assertScenariosPassed(result, List.of("basic"));
        String page = Files.readString(html);
        assertTrue(page.contains("vmmkit run, vmm mode"), "says where the figures come from");
        assertTrue(page.contains("\"figures\":[{\"name\":\"operations\""), "holds the summary figures");
        Matcher trace = Pattern.compile("trace (vmmkit-run-\\d+\\.csv) \\(host driver\\)").matcher(result.stderr());
        assertTrue(trace.find(), "the replay's summary goes to stderr: " + result);
        assertFalse(Files.exists(Path.of(System.getProperty("java.io.tmpdir"), trace.group(1))), "the temporary trace is removed");
    }

    @ParameterizedTest
    @CsvSource({"VMM_CHUNK_SIZE, 3M", "VMM_CHUNK_SIZE, 6M", "VMM_VA_SIZE, 1K", "VMM_DEVICE_MEMORY, 0",
            "VMM_DEVICE_MEMORY, -5", "VMM_DEVICE_MEMORY, abc", "VMM_PROFILE, /no/such/folder/profile.json"})
    void aBadSettingStopsRunBeforeTheProgramStarts(String key, String value) throws Exception {
        Path started = dir.resolve("started");
        ProcessResult result = vmmkitRun(REAL, Map.of(key, value), "--driver", "host", "--", "touch", started.toString());
        assertEquals(2, result.exitCode(), result::toString);
        assertTrue(result.stderr().startsWith("vmmkit run: " + key + "=" + value + ": "), result::toString);
        assertEquals(1, result.stderr().strip().lines().count(), result::toString);
        assertFalse(Files.exists(started), "the program must not start");
    }

    @Test
    void aBarePreloadWithABadSettingWarnsOnceAndPassesEverythingThrough() throws Exception {
        ProcessResult result = vmmkitRun(REAL, Map.of(), "--driver", "host", "--",
                "env", "VMM_CHUNK_SIZE=3M", ALLOC_TEST.toString(), "errors", "foreign");
        assertScenariosPassed(result, List.of("errors", "foreign"));
        assertTrue(result.stderr().contains("vmmkit: VMM_CHUNK_SIZE=3M: must be a power of two"), result::toString);
        assertTrue(result.stderr().contains("passing every CUDA call through"), result::toString);
        assertFalse(result.stderr().contains("cannot load vmmkit"), result::toString);
    }

    // The peak profile: saved by a run that ends with status 0, read by the next run of the same program.

    private Path profileCache() {
        return dir.resolve("cache").resolve("vmmkit").resolve("profiles");
    }

    @Test
    void aSecondRunTakesItsPeakHintFromTheFirstRunsProfile() throws Exception {
        Path first = dir.resolve("first.json"), second = dir.resolve("second.json"), other = dir.resolve("other.json");
        assertScenariosPassed(vmmkitRun(REAL, Map.of(), "--driver", "host", "--stats", first.toString(), "--",
                ALLOC_TEST.toString(), "basic"), List.of("basic"));
        JsonNode s1 = stats(first);
        assertFalse(s1.get("profile").get("read").asBoolean() || s1.get("profile").get("used").asBoolean(), s1::toString);
        assertTrue(s1.get("profile").get("saved").asBoolean(), s1::toString);
        assertEquals(0, s1.get("devices").get(0).get("peak_hint_bytes").asLong(), s1::toString);
        Path file = Path.of(s1.get("profile").get("file").asText());
        assertEquals(profileCache(), file.getParent());
        long peak = s1.get("devices").get(0).get("peak_live_bytes").asLong();
        assertEquals(peak, PeakProfile.parse(Files.readString(file)).device(0).peakLiveBytes());

        ProcessResult again = vmmkitRun(REAL, Map.of(), "--driver", "host", "--stats", second.toString(), "--",
                ALLOC_TEST.toString(), "basic");
        assertScenariosPassed(again, List.of("basic"));
        JsonNode s2 = stats(second);
        assertTrue(s2.get("profile").get("used").asBoolean(), s2::toString);
        assertEquals(peak, s2.get("devices").get(0).get("peak_hint_bytes").asLong(), s2::toString);
        assertTrue(again.stderr().contains("vmmkit run: peak profile " + file + ": used as the peak hint (device 0: "
                + dev.vmmkit.core.ByteSize.format(peak) + "); saved this run's peak (device 0: "), again::toString);

        // Other arguments: another program, with a profile of its own.
        assertScenariosPassed(vmmkitRun(REAL, Map.of(), "--driver", "host", "--stats", other.toString(), "--",
                ALLOC_TEST.toString(), "basic", "basic"), List.of("basic"));
        JsonNode s3 = stats(other);
        assertFalse(s3.get("profile").get("used").asBoolean(), s3::toString);
        assertNotEquals(file.toString(), s3.get("profile").get("file").asText());
    }

    /** {@code alloc_test basic} under {@code vmmkit run --profile PROFILE --stats STATS}, the profile saying device 0 peaked at {@code peak}. */
    private ProcessResult runWithProfile(Path profile, Path stats, long peak, Map<String, String> env) throws Exception {
        Files.writeString(profile, new PeakProfile("2026-01-01T00:00:00Z", new ProgramIdentity("/x", List.of(), "/"),
                List.of(new PeakProfile.DeviceFigures(0, peak, peak, 10))).toJson());
        ProcessResult result = vmmkitRun(REAL, env, "--driver", "host", "--profile", profile.toString(),
                "--stats", stats.toString(), "--", ALLOC_TEST.toString(), "basic");
        assertScenariosPassed(result, List.of("basic"));
        return result;
    }

    @Test
    void anExplicitPeakHintWinsOverTheProfile() throws Exception {
        Path stats = dir.resolve("stats.json");
        ProcessResult result = runWithProfile(dir.resolve("profile.json"), stats, 40L << 20, Map.of("VMM_PEAK_HINT", "64M"));
        JsonNode s = stats(stats);
        assertEquals(64L << 20, s.get("devices").get(0).get("peak_hint_bytes").asLong(), s::toString);
        assertTrue(s.get("profile").get("read").asBoolean() && !s.get("profile").get("used").asBoolean(), s::toString);
        assertTrue(s.get("profile").get("saved").asBoolean(), "the profile is still kept up to date: " + s);
        assertTrue(result.stderr().contains(": read, not used; saved this run's peak"), result::toString);
    }

    @ParameterizedTest
    @ValueSource(strings = {"option", "environment"})
    void profilesCanBeTurnedOff(String how) throws Exception {
        Path stats = dir.resolve("stats.json");
        List<String> args = new ArrayList<>(List.of("--driver", "host", "--stats", stats.toString()));
        if (how.equals("option")) args.addAll(List.of("--profile", "off"));
        args.addAll(List.of("--", ALLOC_TEST.toString(), "basic"));
        ProcessResult result = vmmkitRun(REAL, how.equals("option") ? Map.of() : Map.of("VMM_PROFILE", "off"), args.toArray(String[]::new));
        assertScenariosPassed(result, List.of("basic"));
        assertTrue(stats(stats).get("profile").isNull());
        assertFalse(Files.exists(dir.resolve("cache")), "nothing is written");
        assertFalse(result.stderr().contains("peak profile"), result::toString);
    }

    /** A profile that cannot be used is one warning; the program runs without it, and its run writes a good one. */
    @ParameterizedTest
    @ValueSource(strings = {"not json", "{\"format\":\"vmmkit-peak-profile\",\"version\":1,\"devices\":[{\"dev",
            "{\"format\":\"vmmkit-peak-profile\",\"version\":7,\"program\":{},\"devices\":[]}"})
    void aCorruptTruncatedOrForeignVersionProfileIsOneWarning(String content) throws Exception {
        Path profile = dir.resolve("profile.json"), stats = dir.resolve("stats.json");
        Files.writeString(profile, content);
        ProcessResult result = vmmkitRun(REAL, Map.of(), "--driver", "host", "--profile", profile.toString(),
                "--stats", stats.toString(), "--", ALLOC_TEST.toString(), "basic");
        assertScenariosPassed(result, List.of("basic"));
        List<String> warnings = result.stderr().lines().filter(line -> line.startsWith("vmmkit: ")).toList();
        assertEquals(1, warnings.size(), result::toString);
        assertTrue(warnings.getFirst().startsWith("vmmkit: the peak profile " + profile + " is not usable ("), result::toString);
        JsonNode s = stats(stats);
        assertFalse(s.get("profile").get("used").asBoolean(), s::toString);
        assertEquals(s.get("peak_live_bytes").asLong(), PeakProfile.parse(Files.readString(profile)).device(0).peakLiveBytes());
    }

    @Test
    void aProfilePeakAboveTheDevicesMemoryIsNotUsed() throws Exception {
        Path stats = dir.resolve("stats.json");
        ProcessResult result = runWithProfile(dir.resolve("profile.json"), stats, 1L << 40, Map.of("VMM_DEVICE_MEMORY", "1G"));
        assertTrue(result.stderr().contains("says device 0 peaked at 1 TiB, above its memory (1 GiB); not used"), result::toString);
        assertEquals(0, stats(stats).get("devices").get(0).get("peak_hint_bytes").asLong());
    }

    /** A run that exits with another status, or is killed, leaves the profile as it was. */
    @ParameterizedTest
    @CsvSource({"fail, 3", "die, 143"})
    void aFailedOrKilledRunDoesNotReplaceTheProfile(String ending, int status) throws Exception {
        Path profile = dir.resolve("profile.json");
        assertScenariosPassed(vmmkitRun(REAL, Map.of(), "--driver", "host", "--profile", profile.toString(), "--",
                ALLOC_TEST.toString(), "basic"), List.of("basic"));
        String good = Files.readString(profile);
        ProcessResult result = vmmkitRun(REAL, Map.of(), "--driver", "host", "--profile", profile.toString(), "--",
                ALLOC_TEST.toString(), "threads", ending);
        assertEquals(status, result.exitCode(), result::toString);
        assertEquals(good, Files.readString(profile));
        if (status == 3) assertTrue(result.stderr().contains("; not saved (exit status 3)"), result::toString);
    }

    /** Four runs of one program ending together: one whole profile, no temporary file left, no warning. */
    @Test
    void concurrentRunsOfOneProgramLeaveOneWholeProfile() throws Exception {
        String four = ("'" + ALLOC_TEST + "' basic & ").repeat(4) + "wait";
        ProcessResult result = vmmkitRun(REAL, Map.of(), "--driver", "host", "--", "sh", "-c", four);
        assertEquals(0, result.exitCode(), result::toString);
        assertEquals(4, result.stdout().lines().filter("ok basic"::equals).count(), result::toString);
        assertFalse(result.stderr().contains("vmmkit: "), result::toString);
        List<String> files;
        try (var list = Files.list(profileCache())) {
            files = list.map(f -> f.getFileName().toString()).sorted().toList();
        }
        assertEquals(2, files.size(), files::toString); // KEY.json and KEY.json.lock
        PeakProfile profile = PeakProfile.parse(Files.readString(profileCache().resolve(files.getFirst())));
        assertEquals(List.of("basic"), profile.program().arguments());
        assertTrue(profile.device(0).peakLiveBytes() > 0);
    }
}
