package dev.vmmkit.tools;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.vmmkit.driver.DeviceBytes;
import dev.vmmkit.driver.host.HostDeviceBytes;
import dev.vmmkit.tools.replay.MallocAllocator;
import dev.vmmkit.tools.replay.ReplayBackend;
import dev.vmmkit.tools.replay.ReplayTarget;
import dev.vmmkit.core.VmmConfig;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ReplayCommandTest {

    private static final String TRACE = """
            # action,addr,size,stream
            alloc,1,4096,0
            alloc,2,8192,0
            free_requested,1,4096,0
            free_completed,1,4096,0
            """;

    @TempDir
    Path dir;

    private final StringWriter out = new StringWriter();
    private final StringWriter err = new StringWriter();
    private final List<String> opened = new ArrayList<>();
    private final List<VmmConfig> configs = new ArrayList<>();
    private int targetsMade;
    private boolean backendClosed;
    private Optional<DeviceBytes> backendBytes = Optional.of(HostDeviceBytes.unchecked());
    private Path trace;
    private Map<String, String> environment = Map.of();

    @BeforeEach
    void writeTrace() throws IOException {
        trace = dir.resolve("small.csv");
        Files.writeString(trace, TRACE);
    }

    @Test
    void replaysATracePrintsASummaryAndWritesJson() throws IOException {
        Path json = dir.resolve("report.json");

        int exit = run("--driver", "host", "--device-memory", "1G", "--json", json.toString(), trace.toString());

        assertEquals(0, exit, err.toString());
        assertTrue(out.toString().startsWith("trace small.csv (malloc driver): 3 ops (2 allocs, 1 frees)"), out.toString());
        assertEquals(List.of("HOST 0 1073741824"), opened);
        assertEquals(2, targetsMade, "one warm-up run and the measured run, each on a fresh allocator");
        assertTrue(backendClosed);
        JsonNode report = new ObjectMapper().readTree(json.toFile());
        assertEquals(3, report.get("ops").asLong());
        assertEquals(4096 + 8192, report.get("peak_live_bytes").asLong());
        assertFalse(report.get("trace_truncated").asBoolean(), "the trace begins with the program");
        assertEquals("", err.toString());
    }

    @Test
    void aTraceThatBeganLateReplaysFromTheAllocationsItFreesWithoutAllocating() throws IOException {
        Path late = dir.resolve("late.csv");
        Files.writeString(late, "alloc,1,4096,0\nfree_completed,9,1048576,0\nfree_completed,1,4096,0\n");
        Path json = dir.resolve("report.json");

        int exit = run("--warmup", "0", "--json", json.toString(), late.toString());

        assertEquals(0, exit, err.toString());
        assertTrue(out.toString().startsWith("trace late.csv (malloc driver): 4 ops (2 allocs, 2 frees)"), out.toString());
        assertTrue(out.toString().contains("the trace began after the program had allocated"), out.toString());
        JsonNode report = new ObjectMapper().readTree(json.toFile());
        assertEquals(1048576 + 4096, report.get("peak_live_bytes").asLong(), "key 9 was live from the start");
        assertTrue(report.get("trace_truncated").asBoolean());
    }

    @Test
    void severalTracesGiveOneJsonObjectKeyedByFileName() throws IOException {
        Path other = dir.resolve("other.csv.gz");
        Files.writeString(other, "alloc,7,512,0\n");
        Path json = dir.resolve("reports.json");

        int exit = run("--warmup", "0", "--verify", "--json", json.toString(), trace.toString(), other.toString());

        assertEquals(0, exit, err.toString());
        assertEquals(2, targetsMade);
        JsonNode reports = new ObjectMapper().readTree(json.toFile());
        assertEquals(List.of("small.csv", "other.csv.gz"), names(reports));
        assertEquals(1, reports.get("other.csv.gz").get("allocs").asLong());
        assertEquals(List.of("AUTO 0 0"), opened, "auto driver and the whole device by default");
    }

    @Test
    void aMalformedTraceFailsWithOneLineAndWritesNothing() throws IOException {
        Path bad = dir.resolve("bad.csv");
        Files.writeString(bad, "alloc,1,512,0\nfree_completed,1,512,0\nfree_completed,1,512,0\n");
        Path json = dir.resolve("report.json");

        int exit = run("--json", json.toString(), trace.toString(), bad.toString());

        assertEquals(1, exit);
        assertEquals("vmmkit replay: bad.csv:3: free of key 1, which is already freed (a second free without an alloc between)\n",
                err.toString().replace(System.lineSeparator(), "\n"));
        assertEquals("", out.toString(), "no trace is replayed when one is malformed");
        assertTrue(opened.isEmpty());
        assertFalse(Files.exists(json));
    }

    @Test
    void aMissingTraceFailsWithOneLine() {
        int exit = run(dir.resolve("absent.csv").toString());

        assertEquals(1, exit);
        assertEquals("vmmkit replay: cannot read trace " + dir.resolve("absent.csv") + ": no such file",
                err.toString().strip());
    }

    @Test
    void verifyIsRefusedWhenTheHostCannotReachDeviceMemory() {
        backendBytes = Optional.empty();

        int exit = run("--verify", trace.toString());

        assertEquals(1, exit);
        assertEquals("vmmkit replay: --verify needs the host driver: vmmkit cannot copy malloc device memory to the host yet",
                err.toString().strip());
        assertTrue(backendClosed);
    }

    @Test
    void usageErrorsExitWithTwo() {
        assertEquals(2, run());
        assertEquals(2, run("--driver", "opencl", trace.toString()));
        assertEquals(2, run("--device-memory", "lots", trace.toString()));
        assertEquals(2, run("--device-memory", "0", trace.toString()));
        assertEquals(2, run("--capacity", "1G", trace.toString()), "the old spelling is gone");
        assertEquals(2, run("--backend", "cuda-malloc-async", "--device-memory", "1G", trace.toString()));
        assertEquals(2, run("--warmup", "-1", trace.toString()));
        assertTrue(opened.isEmpty());
    }

    @Test
    void isASubcommandOfVmmkit() throws IOException {
        Path bad = dir.resolve("bad.csv");
        Files.writeString(bad, "alloc,1,512\n");
        StringWriter cliErr = new StringWriter();
        CommandLine cli = VmmkitCli.commandLine().setErr(new PrintWriter(cliErr));

        assertEquals(1, cli.execute("replay", "--driver", "HOST", bad.toString()));
        assertEquals("vmmkit replay: bad.csv:1: expected 4 fields (action,addr,size,stream), found 3",
                cliErr.toString().strip());
        assertEquals(2, VmmkitCli.commandLine().setErr(new PrintWriter(new StringWriter())).execute("replay"));
    }

    @ParameterizedTest
    @ValueSource(ints = {5, 20, 40})
    void aTruncatedGzipTraceIsOneLineNamingTheFile(int keptBytes) throws IOException {
        java.io.ByteArrayOutputStream gz = new java.io.ByteArrayOutputStream();
        try (var zip = new java.util.zip.GZIPOutputStream(gz)) {
            zip.write(TRACE.repeat(20).getBytes(java.nio.charset.StandardCharsets.UTF_8));
        }
        Path cut = dir.resolve("cut.csv.gz");
        Files.write(cut, java.util.Arrays.copyOf(gz.toByteArray(), keptBytes));

        int exit = run(cut.toString());

        assertEquals(1, exit);
        assertEquals("vmmkit replay: cut.csv.gz: the gzip data is cut short or damaged (a truncated file?)",
                err.toString().strip());
        assertTrue(opened.isEmpty());
    }

    @Test
    void aSizeOf2To64Minus1IsOutOfRangeNotMalformed() throws IOException {
        Path big = dir.resolve("big.csv");
        Files.writeString(big, "alloc,1,18446744073709551615,0\n");

        assertEquals(1, run(big.toString()));
        assertEquals("vmmkit replay: big.csv:1: size 18446744073709551615 is out of range (at most 2^63-1)",
                err.toString().strip());
    }

    @Test
    void anAddressPast2To64Minus1IsOutOfRange() throws IOException {
        Path big = dir.resolve("big.csv");
        Files.writeString(big, "alloc,18446744073709551616,1,0\n");

        assertEquals(1, run(big.toString()));
        assertEquals("vmmkit replay: big.csv:1: addr 18446744073709551616 is out of range (at most 2^64-1)",
                err.toString().strip());
    }

    @Test
    void jsonIntoAMissingFolderFailsBeforeReplaying() {
        Path json = dir.resolve("missing").resolve("report.json");

        int exit = run("--json", json.toString(), trace.toString());

        assertEquals(2, exit);
        assertTrue(err.toString().contains(json.toString()) && err.toString().contains("does not exist"), err.toString());
        assertTrue(opened.isEmpty(), "nothing is replayed");
        assertEquals("", out.toString());
    }

    @Test
    void anEmptyTracePrintsNotApplicableFigures() throws IOException {
        Path empty = dir.resolve("empty.csv");
        Files.writeString(empty, "# action,addr,size,stream\n");

        assertEquals(0, run(empty.toString()), err.toString());
        String summary = out.toString();
        assertTrue(summary.contains("fragmentation ratio n/a"), summary);
        assertTrue(summary.contains("hit rate n/a"), summary);
        assertTrue(summary.contains("per op n/a"), summary);
        assertTrue(summary.contains("alloc p50 n/a p99 n/a; free p50 n/a p99 n/a; wall n/a/op"), summary);
        assertFalse(summary.contains("0.000"), summary);
    }

    @Test
    void aBadChunkSizeIsAConfigurationErrorBeforeAnyReplay() {
        environment = Map.of("VMM_CHUNK_SIZE", "3M");
        assertEquals(2, run(trace.toString()));
        assertTrue(err.toString().startsWith("vmmkit replay: VMM_CHUNK_SIZE=3M: must be a power of two"), err.toString());
        assertTrue(opened.isEmpty(), "nothing is replayed");

        environment = Map.of();
        err.getBuffer().setLength(0);
        assertEquals(2, run("--chunk-size", "6M", trace.toString()));
        assertTrue(err.toString().startsWith("vmmkit replay: --chunk-size 6291456: must be a power of two"), err.toString());
        assertTrue(opened.isEmpty());
    }

    @Test
    void thePeakHintComesFromTheOptionOrTheEnvironment() {
        environment = Map.of("VMM_PEAK_HINT", "100M");
        assertEquals(0, run("--warmup", "0", trace.toString()));
        assertEquals(100L << 20, configs.getLast().peakHintBytes());
        assertEquals(0, run("--warmup", "0", "--peak-hint", "710M", trace.toString()));
        assertEquals(710L << 20, configs.getLast().peakHintBytes(), "the option wins");
        environment = Map.of();
        assertEquals(0, run("--warmup", "0", trace.toString()));
        assertEquals(0, configs.getLast().peakHintBytes(), "no hint, whatever profiles vmmkit run keeps");
    }

    private int run(String... args) {
        ReplayCommand command = new ReplayCommand((kind, device, deviceMemory, config) -> {
            opened.add(kind + " " + device + " " + deviceMemory);
            configs.add(config);
            return new MallocBackend();
        }).environment(environment);
        return new CommandLine(command)
                .setCaseInsensitiveEnumValuesAllowed(true)
                .setOut(new PrintWriter(out))
                .setErr(new PrintWriter(err))
                .execute(args);
    }

    private static List<String> names(JsonNode node) {
        List<String> names = new ArrayList<>();
        node.fieldNames().forEachRemaining(names::add);
        return names;
    }

    /** A backend whose allocator is libc malloc; malloc's memory is host memory, so verify works. */
    private final class MallocBackend implements ReplayBackend {
        @Override
        public String driverName() {
            return "malloc";
        }

        @Override
        public ReplayTarget newTarget() {
            targetsMade++;
            return new MallocAllocator();
        }

        @Override
        public Optional<DeviceBytes> deviceBytes() {
            return backendBytes;
        }

        @Override
        public void close() {
            backendClosed = true;
        }
    }

    @Test
    void theCudaMallocAsyncBackendWithoutAGpuIsAClearError() throws IOException {
        org.junit.jupiter.api.Assumptions.assumeFalse(dev.vmmkit.driver.cuda.CudaDriver.isAvailable(), "a GPU is present");
        Path trace = dir.resolve("small.csv");
        Files.writeString(trace, TRACE);
        CommandLine cli = VmmkitCli.commandLine();
        StringWriter err = new StringWriter();
        cli.setErr(new PrintWriter(err));
        assertEquals(1, cli.execute("replay", "--backend", "cuda-malloc-async", trace.toString()));
        assertTrue(err.toString().contains("cuda-malloc-async backend needs"), err.toString());
    }
}
