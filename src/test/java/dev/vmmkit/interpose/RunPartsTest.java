package dev.vmmkit.interpose;

import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.Map;
import java.util.OptionalLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

/** Where a process writes its stats file and trace, with and without a run that collects them. */
class RunPartsTest {
    private static final Path FOLDER = Path.of("/tmp/parts");

    @Test
    void withoutARunThatCollectsAProcessWritesThePathItself() {
        assertNull(RunParts.pathFor(RunParts.Output.STATS, Map.of(), 7));
        assertEquals(Path.of("/out/s.json"), RunParts.pathFor(RunParts.Output.STATS, Map.of("VMM_STATS_FILE", "/out/s.json"), 7));
        assertEquals(Path.of("/out/s.json"), RunParts.pathFor(RunParts.Output.STATS,
                Map.of("VMM_STATS_FILE", "/out/s.json", RunParts.ENVIRONMENT, FOLDER.toString()), 7),
                "a folder alone does not say that this path is collected");
    }

    @Test
    void underARunThatCollectsEachProcessWritesItsPart() {
        Map<String, String> env = Map.of("VMM_TRACE_FILE", "/out/t.csv.gz", "VMMKIT_RUN_TRACE_FILE", "/out/t.csv.gz",
                RunParts.ENVIRONMENT, FOLDER.toString());
        Path part = RunParts.pathFor(RunParts.Output.TRACE, env, 4711);
        assertEquals(FOLDER.resolve("4711.trace.t.csv.gz"), part);
        assertEquals(OptionalLong.of(4711), RunParts.pidOf(part, RunParts.Output.TRACE, Path.of("/out/t.csv.gz")));
        assertEquals(OptionalLong.empty(), RunParts.pidOf(part, RunParts.Output.STATS, Path.of("/out/t.csv.gz")));
        assertEquals(OptionalLong.empty(), RunParts.pidOf(part, RunParts.Output.TRACE, Path.of("/out/u.csv.gz")));
        assertEquals(OptionalLong.empty(), RunParts.pidOf(FOLDER.resolve("x.trace.t.csv.gz"), RunParts.Output.TRACE,
                Path.of("/out/t.csv.gz")));
        assertEquals(OptionalLong.empty(), RunParts.pidOf(FOLDER.resolve(".trace.t.csv.gz"), RunParts.Output.TRACE,
                Path.of("/out/t.csv.gz")));
    }

    @Test
    void aProgramThatNamesAnotherPathItselfGetsThatPath() {
        Map<String, String> env = Map.of("VMM_TRACE_FILE", "/mine/t.csv", "VMMKIT_RUN_TRACE_FILE", "/out/t.csv",
                RunParts.ENVIRONMENT, FOLDER.toString());
        assertEquals(Path.of("/mine/t.csv"), RunParts.pathFor(RunParts.Output.TRACE, env, 3));
    }
}
