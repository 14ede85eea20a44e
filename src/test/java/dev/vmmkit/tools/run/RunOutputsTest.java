package dev.vmmkit.tools.run;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.vmmkit.interpose.RunParts;
import dev.vmmkit.trace.TraceWriter;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The parts folder of a run, and its parts put in place: written here as the processes write them. */
class RunOutputsTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path dir;

    @Test
    void aRunWithoutStatsOrTraceMakesNoFolder() throws Exception {
        Map<String, String> env = new HashMap<>();
        try (RunOutputs outputs = RunOutputs.forProgram(env)) {
            assertFalse(env.containsKey(RunParts.ENVIRONMENT));
            assertFalse(outputs.collectStats(dir.resolve("s.json")));
            assertEquals(List.of(), outputs.collectTraces(dir.resolve("t.csv")));
        }
    }

    @Test
    void tracesOfSeveralProcessesEachKeepTheirOwnFileAndTheLargestTheTracesPath() throws Exception {
        Path target = dir.resolve("run.csv.gz");
        Map<String, String> env = new HashMap<>(Map.of("VMM_TRACE_FILE", target.toString()));
        Path folder;
        try (RunOutputs outputs = RunOutputs.forProgram(env)) {
            folder = Path.of(env.get(RunParts.ENVIRONMENT));
            assertEquals(target.toString(), env.get(RunParts.Output.TRACE.collectedVariable()));
            writeTrace(RunParts.partOf(folder, RunParts.Output.TRACE, 41, target), 3);
            writeTrace(RunParts.partOf(folder, RunParts.Output.TRACE, 42, target), 50);
            writeTrace(RunParts.partOf(folder, RunParts.Output.TRACE, 43, target), 0); // a launcher: header only
            Files.writeString(folder.resolve("42.trace.other.csv.gz"), "not this run's target");
            List<String> lines = outputs.collectTraces(target);
            assertEquals(1, lines.size(), lines::toString);
            assertTrue(lines.getFirst().startsWith("2 processes recorded requests"), lines::toString);
            assertTrue(lines.getFirst().contains(target + " (pid 42, the most requests)"), lines::toString);
            assertEquals(50, allocs(target));
            assertEquals(3, allocs(dir.resolve("run.41.csv.gz")));
            assertFalse(Files.exists(dir.resolve("run.43.csv.gz")), "a trace without requests is dropped");
        }
        assertFalse(Files.exists(folder), "the parts folder goes at the end");
    }

    @Test
    void oneProcessesTraceIsTheTraceWithNoLine() throws Exception {
        Path target = dir.resolve("t.csv");
        Map<String, String> env = new HashMap<>(Map.of("VMM_TRACE_FILE", target.toString()));
        try (RunOutputs outputs = RunOutputs.forProgram(env)) {
            writeTrace(RunParts.partOf(Path.of(env.get(RunParts.ENVIRONMENT)), RunParts.Output.TRACE, 5, target), 4);
            assertEquals(List.of(), outputs.collectTraces(target));
            assertEquals(4, allocs(target));
        }
    }

    @Test
    void statsPartsBecomeOneFileAndAnUnreadablePartCountsAsUnfinished() throws Exception {
        Path target = dir.resolve("stats.json");
        Map<String, String> env = new HashMap<>(Map.of("VMM_STATS_FILE", target.toString()));
        try (RunOutputs outputs = RunOutputs.forProgram(env)) {
            Path folder = Path.of(env.get(RunParts.ENVIRONMENT));
            Files.writeString(RunParts.partOf(folder, RunParts.Output.STATS, 8, target),
                    "{\"mode\":\"vmm\",\"complete\":true,\"allocs\":4,\"frees\":4,\"passthrough_calls\":0,"
                            + "\"peak_live_bytes\":10,\"peak_reserved_bytes\":20,\"devices\":[]}");
            Files.writeString(RunParts.partOf(folder, RunParts.Output.STATS, 9, target), "{\"mode\":\"vmm\",\"compl");
            assertTrue(outputs.collectStats(target));
        }
        JsonNode stats = JSON.readTree(target.toFile());
        assertFalse(stats.get("complete").asBoolean());
        assertEquals(4, stats.get("allocs").asLong());
        assertEquals(2, stats.get("processes").size());
    }

    @Test
    void theOtherTracesTakeThePidBeforeTheExtension() {
        assertEquals(dir.resolve("t.7.csv.gz"), RunOutputs.withPid(dir.resolve("t.csv.gz"), 7));
        assertEquals(dir.resolve("t.7.csv"), RunOutputs.withPid(dir.resolve("t.csv"), 7));
        assertEquals(dir.resolve("trace.7"), RunOutputs.withPid(dir.resolve("trace"), 7));
        assertEquals(dir.resolve(".hidden.7"), RunOutputs.withPid(dir.resolve(".hidden"), 7));
    }

    private static void writeTrace(Path file, int allocs) throws Exception {
        try (TraceWriter writer = TraceWriter.open(file, "test")) {
            for (int i = 0; i < allocs; i++) writer.alloc(4096L * (i + 1), 512, 0);
        }
    }

    private static long allocs(Path trace) throws Exception {
        return dev.vmmkit.trace.TraceReader.read(trace).allocs();
    }
}
