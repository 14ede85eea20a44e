package dev.vmmkit.tools;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code vmmkit replay} of PyTorch memory snapshots, through vmmkit's allocator on the host
 * emulation. The expected recorded figures are those {@code scripts/synthetic-snapshot.py} wrote
 * beside each snapshot while simulating the allocator that made it.
 */
class SnapshotReplayTest {
    private static final Path DIR = Path.of("src", "test", "resources", "snapshots");

    @TempDir
    Path dir;

    private final StringWriter out = new StringWriter();
    private final StringWriter err = new StringWriter();

    @Test
    void aSnapshotReplaysBesidePyTorchsRecordedReservedLine() throws IOException {
        Path json = dir.resolve("r.json");
        Path html = dir.resolve("r.html");

        int exit = replay("--json", json.toString(), "--html", html.toString(), DIR.resolve("whole.pickle").toString());

        assertEquals(0, exit, err.toString());
        JsonNode expected = figures("whole").get(0);
        JsonNode report = new ObjectMapper().readTree(json.toFile());
        assertEquals(expected.get("reserved_peak_bytes").asLong(), report.get("recorded_reserved_peak_bytes").asLong());
        assertEquals(expected.get("live_peak_bytes").asLong(), report.get("recorded_live_peak_bytes").asLong());
        assertEquals(expected.get("live_peak_bytes").asLong(), report.get("peak_live_bytes").asLong(),
                "vmmkit saw the same requests");
        assertFalse(report.get("trace_truncated").asBoolean());
        long vmmkit = report.get("peak_reserved_bytes").asLong();
        long pytorch = expected.get("reserved_peak_bytes").asLong();
        String verdict = vmmkit < pytorch ? "less" : "more";
        assertTrue(out.toString().contains("PyTorch reserved ") && out.toString().contains("vmmkit would reserve "),
                out.toString());
        assertTrue(out.toString().contains(" " + verdict + " ("), out.toString());
        String page = Files.readString(html);
        assertTrue(page.contains("PyTorch reserved (recorded)"), "the chart draws PyTorch's line");
        assertTrue(page.contains("\"recordedReservedBytes\":["), "with its data");
        assertTrue(page.contains("\"comparison\":\"PyTorch reserved "), "and says how they compare");
    }

    @Test
    void aTruncatedSnapshotReplaysFromTheStateItBeganInAndSaysSo() throws IOException {
        Path json = dir.resolve("t.json");

        int exit = replay("--json", json.toString(), DIR.resolve("truncated-expandable.pickle.gz").toString());

        assertEquals(0, exit, err.toString());
        JsonNode expected = figures("truncated-expandable").get(0);
        JsonNode report = new ObjectMapper().readTree(json.toFile());
        assertTrue(report.get("trace_truncated").asBoolean());
        assertEquals(expected.get("reserved_peak_bytes").asLong(), report.get("recorded_reserved_peak_bytes").asLong());
        assertEquals(expected.get("live_peak_bytes").asLong(), report.get("peak_live_bytes").asLong());
        assertTrue(out.toString().contains("the trace began after the program had allocated"), out.toString());
    }

    @Test
    void everyDeviceIsReplayedOrTheOneChosen() throws IOException {
        Path all = dir.resolve("all.json");
        Path one = dir.resolve("one.json");
        String snapshot = DIR.resolve("two-devices.pickle.gz").toString();

        assertEquals(0, replay("--json", all.toString(), snapshot), err.toString());
        assertEquals(0, replay("--device", "1", "--json", one.toString(), snapshot), err.toString());

        JsonNode expected = figures("two-devices");
        JsonNode reports = new ObjectMapper().readTree(all.toFile());
        List<String> keys = new ArrayList<>();
        reports.fieldNames().forEachRemaining(keys::add);
        assertEquals(List.of("two-devices.pickle.gz device 0", "two-devices.pickle.gz device 1"), keys);
        for (int d = 0; d < 2; d++) {
            assertEquals(expected.get(d).get("reserved_peak_bytes").asLong(),
                    reports.get(keys.get(d)).get("recorded_reserved_peak_bytes").asLong());
        }
        JsonNode chosen = new ObjectMapper().readTree(one.toFile());
        assertEquals(expected.get(1).get("reserved_peak_bytes").asLong(), chosen.get("recorded_reserved_peak_bytes").asLong());
    }

    @Test
    void convertWritesTheSnapshotsRequestsAsACsvTraceThatReplaysTheSame() throws IOException {
        Path csv = dir.resolve("t.csv.gz");
        String snapshot = DIR.resolve("truncated-expandable.pickle.gz").toString();

        int exit = VmmkitCli.commandLine().setOut(new PrintWriter(out, true)).setErr(new PrintWriter(err, true))
                .execute("trace", "convert", snapshot, csv.toString());

        assertEquals(0, exit, err.toString());
        var fromSnapshot = dev.vmmkit.trace.TraceFiles.read(Path.of(snapshot), java.util.OptionalInt.empty()).getFirst();
        var fromCsv = dev.vmmkit.trace.TraceReader.read(csv);
        assertEquals(fromSnapshot.ops(), fromCsv.ops());
        assertEquals(figures("truncated-expandable").get(0).get("live_peak_bytes").asLong(), fromCsv.peakLiveBytes());
        for (int op = 0; op < fromCsv.ops(); op++) {
            assertEquals(fromSnapshot.kind(op), fromCsv.kind(op));
            assertEquals(fromSnapshot.size(op), fromCsv.size(op));
            assertEquals(fromSnapshot.stream(op), fromCsv.stream(op));
        }
    }

    @Test
    void convertKeepsEachCudaFreesCompletionWhereTheTraceHadIt() throws IOException {
        Path csv = dir.resolve("fenced.csv");
        Path recorded = Path.of("traces", "gen_llama_b32_fenced.csv.gz");

        int exit = VmmkitCli.commandLine().setOut(new PrintWriter(out, true)).setErr(new PrintWriter(err, true))
                .execute("trace", "convert", recorded.toString(), csv.toString());

        assertEquals(0, exit, err.toString());
        List<String> written = java.nio.file.Files.readAllLines(csv);
        List<String> original;
        try (var in = new java.util.zip.GZIPInputStream(java.nio.file.Files.newInputStream(recorded))) {
            original = new String(in.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8).lines().toList();
        }
        assertEquals(original.subList(1, original.size()), written.subList(1, written.size()), "every line after the header");
    }

    @Test
    void convertKeepsTheRequestsThatGaveUpWaiting() throws IOException {
        String device = Long.toUnsignedString(dev.vmmkit.core.DeviceMemoryResource.DEVICE_WIDE_STREAM);
        List<String> lines = List.of(
                "alloc,4096,1000,0",
                "free_requested,4096,1000," + device,
                "alloc,8192,3000,0",
                "wait_gave_up,8192,3000,0",
                "free_completed,4096,1000," + device);
        Path recorded = dir.resolve("gave-up.csv");
        java.nio.file.Files.write(recorded, lines);
        Path csv = dir.resolve("converted.csv");

        int exit = VmmkitCli.commandLine().setOut(new PrintWriter(out, true)).setErr(new PrintWriter(err, true))
                .execute("trace", "convert", recorded.toString(), csv.toString());

        assertEquals(0, exit, err.toString());
        List<String> written = java.nio.file.Files.readAllLines(csv);
        assertEquals(lines, written.subList(1, written.size()), "every line after the header");
    }

    @Test
    void convertOfSeveralDevicesNeedsOne() {
        int exit = VmmkitCli.commandLine().setOut(new PrintWriter(out, true)).setErr(new PrintWriter(err, true))
                .execute("trace", "convert", DIR.resolve("two-devices.pickle.gz").toString(), dir.resolve("x.csv").toString());

        assertEquals(2, exit);
        assertEquals("vmmkit trace convert: two-devices.pickle.gz has 2 device traces; choose one with --device N",
                err.toString().strip());
    }

    private int replay(String... args) {
        List<String> all = new ArrayList<>(List.of("replay", "--driver", "host", "--warmup", "0"));
        all.addAll(List.of(args));
        return VmmkitCli.commandLine().setOut(new PrintWriter(out, true)).setErr(new PrintWriter(err, true))
                .execute(all.toArray(String[]::new));
    }

    private static JsonNode figures(String name) throws IOException {
        return new ObjectMapper().readTree(DIR.resolve(name + ".json").toFile());
    }
}
