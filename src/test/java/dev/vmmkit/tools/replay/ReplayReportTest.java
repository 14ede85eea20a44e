package dev.vmmkit.tools.replay;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.vmmkit.core.AllocatorStats;
import dev.vmmkit.driver.DriverCall;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ReplayReportTest {

    private static final ReplayReport REPORT = new ReplayReport(29_722, 14_862, 14_860, 744_011_432L, 766_509_056L,
            766_509_056.0 / 744_011_432L, new ReplayReport.DriverCalls(2, 361, 361, 361, 12, 12, 0), 0.988,
            new ReplayReport.Latency(95, 1_200), new ReplayReport.Latency(80, 900), 210.4);

    @TempDir
    Path dir;

    @Test
    void jsonHasExactlyTheAgreedKeysInOrder() throws IOException {
        JsonNode json = new ObjectMapper().readTree(ReportFiles.toJson(REPORT));

        assertEquals(List.of("ops", "allocs", "frees", "peak_live_bytes", "peak_reserved_bytes", "fragmentation_ratio",
                "driver_calls", "hit_rate", "alloc_ns", "free_ns", "wall_ns_per_op", "driver_handles",
                "modelled_driver_us_per_op"), names(json));
        assertEquals(List.of("reserve", "create", "map", "set_access", "unmap", "release", "address_free"),
                names(json.get("driver_calls")));
        assertEquals(List.of("p50", "p99"), names(json.get("alloc_ns")));
        assertEquals(List.of("p50", "p99"), names(json.get("free_ns")));
        assertEquals(744_011_432L, json.get("peak_live_bytes").asLong());
        assertEquals(361, json.get("driver_calls").get("set_access").asLong());
        assertEquals(1_200, json.get("alloc_ns").get("p99").asLong());
        assertEquals(210.4, json.get("wall_ns_per_op").asDouble());
    }

    /** REPORT's JSON, written out by hand from the agreed format (not by the serializer under test). */
    private static final String REPORT_JSON = """
            {"ops": 29722, "allocs": 14862, "frees": 14860, "peak_live_bytes": 744011432,
             "peak_reserved_bytes": 766509056, "fragmentation_ratio": %s,
             "driver_calls": {"reserve": 2, "create": 361, "map": 361, "set_access": 361, "unmap": 12,
                              "release": 12, "address_free": 0},
             "hit_rate": 0.988, "alloc_ns": {"p50": 95, "p99": 1200}, "free_ns": {"p50": 80, "p99": 900},
             "wall_ns_per_op": 210.4,
             "driver_handles": {"reserve": 0, "create": 0, "map": 0, "set_access": 0, "unmap": 0,
                                "release": 0, "address_free": 0},
             "modelled_driver_us_per_op": 0.0}
            """.formatted(766_509_056.0 / 744_011_432L);

    @Test
    void jsonHasEveryValueOfTheReport() throws IOException {
        ObjectMapper mapper = new ObjectMapper();
        assertEquals(mapper.readTree(REPORT_JSON), mapper.readTree(ReportFiles.toJson(REPORT)));
    }

    @Test
    void aReportWrittenByHandReadsIntoTheReport() throws IOException {
        ReplayReport read = new ObjectMapper().readValue(REPORT_JSON, ReplayReport.class);
        assertEquals(29_722, read.ops());
        assertEquals(744_011_432L, read.peakLiveBytes());
        assertEquals(361, read.driverCalls().setAccess());
        assertEquals(new ReplayReport.Latency(80, 900), read.freeNs());
        assertEquals(REPORT, read);
    }

    @Test
    void figuresComeFromTheAllocatorStats() {
        AllocatorStats stats = new AllocatorStats(10, 8, 100, 1000, 2048, 2000, 0, 9, 1, 0,
                Map.of(DriverCall.RESERVE, 1L, DriverCall.CREATE, 2L, DriverCall.MAP, 3L, DriverCall.SET_ACCESS, 4L,
                        DriverCall.UNMAP, 5L, DriverCall.RELEASE, 6L, DriverCall.ADDRESS_FREE, 7L,
                        DriverCall.EVENT_RECORD, 99L));

        ReplayReport report = ReplayReport.of(10, 8, stats, new ReplayReport.Latency(1, 2),
                new ReplayReport.Latency(3, 4), 1800);

        assertEquals(new ReplayReport(18, 10, 8, 1000, 2000, 2.0, new ReplayReport.DriverCalls(1, 2, 3, 4, 5, 6, 7),
                0.9, new ReplayReport.Latency(1, 2), new ReplayReport.Latency(3, 4), 100.0), report);
        assertEquals(28, report.driverCalls().total(), "event calls are not virtual memory calls");
    }

    @Test
    void anEmptyReplayHasZeroWallTimePerOp() {
        AllocatorStats nothing = new AllocatorStats(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, Map.of());

        assertEquals(0.0, ReplayReport.of(0, 0, nothing, new ReplayReport.Latency(0, 0),
                new ReplayReport.Latency(0, 0), 5).wallNsPerOp());
    }

    @Test
    void writesTheFileWholeAndReplacesAnOldOne() throws IOException {
        Path file = dir.resolve("report.json");
        Files.writeString(file, "old");

        ReportFiles.write(file, REPORT);

        ObjectMapper mapper = new ObjectMapper();
        assertEquals(mapper.readTree(REPORT_JSON), mapper.readTree(file.toFile()));
        assertTrue(Files.readString(file).endsWith("}\n"), "ends with a line break");
        try (var files = Files.list(dir)) {
            assertEquals(List.of(file), files.toList(), "no temporary file is left behind");
        }
    }

    @Test
    void summaryReadsLikeTheExample() {
        assertEquals("""
                trace bert_infer.csv.gz (host driver): 29,722 ops (14,862 allocs, 14,860 frees)
                peak live 709.5 MiB, peak reserved 731.0 MiB, fragmentation ratio 1.030
                hit rate 98.8%; driver calls: reserve 2, create 361, map 361, set_access 361, unmap 12, release 12, \
                address_free 0; per op 0.037
                alloc p50 95 ns p99 1.20 us; free p50 80 ns p99 900 ns; wall 210.4 ns/op
                """, ReplaySummary.format("bert_infer.csv.gz", "host", REPORT).replace(System.lineSeparator(), "\n"));
    }

    @Test
    void summaryUnitsScale() {
        assertEquals("512 B", ReplaySummary.bytes(512));
        assertEquals("1.5 KiB", ReplaySummary.bytes(1536));
        assertEquals("80.0 GiB", ReplaySummary.bytes(80L << 30));
        assertEquals("2.50 ms", ReplaySummary.duration(2_500_000));
        assertEquals("3.00 s", ReplaySummary.duration(3e9));
    }

    private static List<String> names(JsonNode node) {
        List<String> names = new ArrayList<>();
        node.fieldNames().forEachRemaining(names::add);
        return names;
    }
}
