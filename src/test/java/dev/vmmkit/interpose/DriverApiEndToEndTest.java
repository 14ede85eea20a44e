package dev.vmmkit.interpose;

import dev.vmmkit.ProcessResult;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The driver API under {@code vmmkit run --driver host}: {@code driver_test} (src/test/c) allocates
 * through the stand-in driver {@code libcuda.so.1} (fake_cuda.c) directly, through pointers from
 * cuGetProcAddress and cudaGetDriverEntryPoint, by handle, stream-ordered, pitched, and through a
 * stand-in static runtime; it asks for allocation ranges of interior pointers and frees foreign
 * pointers. The program itself checks, after each scenario, how many allocations reached the
 * stand-ins: none in vmm mode, all in monitor mode.
 */
class DriverApiEndToEndTest {
    private static final Path NATIVE = Path.of("target", "test-native", "driver").toAbsolutePath();
    private static final Path DRIVER_TEST = NATIVE.resolve("driver_test");
    private static final Path SHIM = Path.of("target", "native", "libvmmkit_preload.so").toAbsolutePath();
    private static final List<String> ALL = List.of("direct", "stream_ordered", "proc_address", "by_handle",
            "runtime_entry_points", "static_runtime", "ranges", "pitched", "foreign", "pool", "default_pool", "ipc",
            "no_context");
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path dir;


    private ProcessResult start(List<String> command, Map<String, String> extraEnv) throws IOException, InterruptedException {
        return VmmkitRunCommand.run(command, extraEnv, dir);
    }

    /** {@code vmmkit run ARGS} in a new JVM, as a user runs it. */
    private ProcessResult vmmkitRun(String... args) throws IOException, InterruptedException {
        return vmmkitRun(Map.of(), args);
    }

    private ProcessResult vmmkitRun(Map<String, String> env, String... args) throws IOException, InterruptedException {
        return start(VmmkitRunCommand.of(args), env);
    }

    private static String javaBinary() {
        return Path.of(System.getProperty("java.home"), "bin", "java").toString();
    }

    private static void assertScenariosPassed(ProcessResult result) {
        assertEquals(0, result.exitCode(), result::toString);
        for (String scenario : ALL) assertTrue(result.stdout().contains("ok " + scenario + "\n"), result::toString);
    }

    @Test
    void vmmModeServesEveryDriverCallWithoutTheStandInsAllocators() throws Exception {
        Path stats = dir.resolve("stats.json");
        ProcessResult result = vmmkitRun("--driver", "host", "--stats", stats.toString(), "--", DRIVER_TEST.toString(), "all");
        assertScenariosPassed(result);
        JsonNode s = JSON.readTree(stats.toFile());
        assertEquals("vmm", s.get("mode").asText());
        assertTrue(s.get("allocs").asLong() > 300, s::toString);
        assertEquals(s.get("allocs").asLong(), s.get("frees").asLong(), s::toString);
        // Only the pool's allocation, the foreign frees and the thread without a context reach the stand-in.
        assertTrue(s.get("passthrough_calls").asLong() <= 8, s::toString);
        assertEquals(1, count(result.stderr(), "cuMemAllocFromPoolAsync"), result::toString);
        // The host driver's memory is vmmkit's alone: at most a handle the driver had made and vmmkit
        // not yet counted while a sample read both figures (the largest here: the capture scenario's
        // 40 MiB), and no line about it.
        long notServed = s.get("devices").get(0).get("not_served_bytes").asLong();
        assertTrue(notServed >= 0 && notServed <= 42L << 20, s::toString);
        assertEquals(0, count(result.stderr(), "did not come from vmmkit"), result::toString);
    }

    @Test
    void monitorModePassesEveryDriverCallThroughAndRecordsIt() throws Exception {
        Path stats = dir.resolve("stats.json");
        ProcessResult result = vmmkitRun("--mode", "monitor", "--driver", "host", "--stats", stats.toString(), "--",
                DRIVER_TEST.toString(), "all");
        assertScenariosPassed(result);
        JsonNode s = JSON.readTree(stats.toFile());
        assertEquals("monitor", s.get("mode").asText());
        assertTrue(s.get("allocs").asLong() > 300, s::toString);
        assertEquals(s.get("allocs").asLong(), s.get("frees").asLong(), s::toString);
        assertTrue(s.get("passthrough_calls").asLong() >= 2 * s.get("allocs").asLong(), s::toString);
        assertEquals(0, count(result.stderr(), "cuMemAllocFromPoolAsync"), result::toString); // nothing to warn about
    }

    @Test
    void eachScenarioAloneServesItsCalls() throws Exception {
        for (String scenario : List.of("static_runtime", "proc_address", "runtime_entry_points")) {
            Path stats = dir.resolve(scenario + ".json");
            ProcessResult result = vmmkitRun("--driver", "host", "--stats", stats.toString(), "--", DRIVER_TEST.toString(), scenario);
            assertEquals(0, result.exitCode(), result::toString);
            JsonNode s = JSON.readTree(stats.toFile());
            assertTrue(s.get("allocs").asLong() > 0 && s.get("passthrough_calls").asLong() == 0, scenario + ": " + s);
        }
    }

    /**
     * A stream capture through the driver API, asked for by name and called by symbol: the shim
     * tells vmmkit, which synchronises for earlier frees as it begins and none while it runs
     * (driver_test's "capture").
     */
    @Test
    void aStreamCaptureThroughTheDriverApiHoldsSynchronisationsBack() throws Exception {
        ProcessResult result = vmmkitRun(Map.of("VMM_DEVICE_MEMORY", "64M"), "--driver", "host", "--", DRIVER_TEST.toString(), "capture");
        assertEquals(0, result.exitCode(), result::toString);
        assertTrue(result.stdout().contains("ok capture"), result::toString);
    }

    /** The pair benchmark through the driver API: every pair served by vmmkit (the GPU script times it). */
    @Test
    void theDriverPairBenchmarkRunsOnVmmkit() throws Exception {
        Path stats = dir.resolve("stats.json");
        ProcessResult result = vmmkitRun(Map.of("LD_LIBRARY_PATH", NATIVE.toString()), "--driver", "host", "--stats",
                stats.toString(), "--", NATIVE.getParent().resolve("bench_pair").toString(), "4096", "2000", "driver");
        assertEquals(0, result.exitCode(), result::toString);
        assertTrue(JSON.readTree(result.stdout()).get("pair_median_ns").asDouble() > 0, result::toString);
        JsonNode s = JSON.readTree(stats.toFile());
        // One call only reaches the stand-in runtime: cudaFree(NULL), which starts it.
        assertTrue(s.get("allocs").asLong() > 500_000 && s.get("passthrough_calls").asLong() == 1, s::toString);
    }

    /**
     * vmmkit's own CUDA driver binds libcuda through FFM lookups from inside the JVM: with the shim
     * preloaded they must land on the driver's functions, never on the shim's, while a program's
     * lookup of the same name gets vmmkit's.
     */
    @Test
    void theJvmsOwnDriverLookupsBindTheRealDriver() throws Exception {
        ProcessResult result = start(List.of(javaBinary(), "--enable-native-access=ALL-UNNAMED", "-cp",
                System.getProperty("java.class.path"), JvmLookupProbe.class.getName(), SHIM.toString()),
                Map.of("LD_PRELOAD", SHIM.toString(), "LD_LIBRARY_PATH", NATIVE.toString()));
        assertEquals(0, result.exitCode(), result::toString);
        Matcher m = Pattern.compile("jvm=(\\p{XDigit}+) own=(\\p{XDigit}+) program=(\\p{XDigit}+)").matcher(result.stdout());
        assertTrue(m.find(), result::toString);
        assertEquals(m.group(2), m.group(1), "the JVM's lookup: " + result);
        assertNotEquals(m.group(2), m.group(3), "a program's lookup is answered by vmmkit: " + result);
    }

    private static int count(String text, String word) {
        return text.split(Pattern.quote(word), -1).length - 1;
    }
}
