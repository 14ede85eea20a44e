package dev.vmmkit.tools;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.zip.GZIPInputStream;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The example output in docs/replay.md is the current build's: the BERT trace replayed on the host
 * emulation gives the same first three lines (counts, memory, driver calls: they do not depend on
 * timing), a fourth line of the same form, and the same fifth (driver handles and their model).
 * That comparison is a regression guard: the documented lines are the program's own earlier output.
 * What the figures should be is checked from first principles by
 * {@link #theFiguresAreThoseOfTheTraceCountedByHand}: the trace file read line by line here, its
 * allocations, frees and peak of live bytes added up without any of vmmkit's code.
 */
class DocsExampleTest {
    private static final Path DOC = Path.of("docs", "replay.md");
    private static final Path BERT = Path.of("..", "shared", "traces", "bert_infer.csv.gz");
    private static final String MARK = "<!-- replay-example -->";

    @Test
    void theReplayExampleIsTheCurrentOutput() throws Exception {
        assumeTrue(Files.isReadable(BERT), "the shared traces are not at " + BERT.toAbsolutePath());
        String doc = Files.readString(DOC);
        int at = doc.indexOf(MARK);
        assertTrue(at >= 0, "docs/replay.md marks its example with " + MARK);
        int start = doc.indexOf("```\n", at) + 4;
        List<String> documented = doc.substring(start, doc.indexOf("```", start)).strip().lines().toList();

        StringWriter out = new StringWriter();
        int exit = VmmkitCli.commandLine().setOut(new PrintWriter(out))
                .execute("replay", "--driver", "host", "--warmup", "0", BERT.toString());
        assertEquals(0, exit);
        List<String> actual = out.toString().strip().lines().toList();

        assertEquals(5, documented.size(), "five lines documented");
        assertEquals(actual.get(4), documented.get(4), "docs/replay.md's driver handles line is out of date");
        assertEquals(actual.subList(0, 3), documented.subList(0, 3),
                "docs/replay.md's example is out of date: paste the output of ./vmmkit replay --driver host " + BERT);
        String timing = "alloc p50 \\S+ \\S+ p99 \\S+ \\S+; free p50 \\S+ \\S+ p99 \\S+ \\S+; wall \\S+ \\S+/op";
        assertTrue(documented.get(3).matches(timing), documented.get(3));
        assertTrue(actual.get(3).matches(timing), actual.get(3));
    }
    @Test
    void theFiguresAreThoseOfTheTraceCountedByHand(@TempDir Path dir) throws Exception {
        assumeTrue(Files.isReadable(BERT), "the shared traces are not at " + BERT.toAbsolutePath());
        long allocs = 0, frees = 0, live = 0, peak = 0;
        Map<String, Long> liveSizes = new HashMap<>();
        try (BufferedReader lines = new BufferedReader(new InputStreamReader(
                new GZIPInputStream(Files.newInputStream(BERT)), StandardCharsets.US_ASCII))) {
            for (String line; (line = lines.readLine()) != null; ) {
                if (line.startsWith("#")) continue;
                String[] field = line.split(","); // action,addr,size,stream
                switch (field[0]) {
                    case "alloc" -> {
                        long size = Long.parseLong(field[2]);
                        assertNull(liveSizes.put(field[1] + "@" + field[3], size), line);
                        allocs++;
                        live += size;
                        peak = Math.max(peak, live);
                    }
                    case "free_completed" -> { // the memory is reusable from here (free_requested is not yet)
                        live -= liveSizes.remove(field[1] + "@" + field[3]);
                        frees++;
                    }
                    default -> { } // free_requested and the caching allocator's segment_* lines
                }
            }
        }
        Path json = dir.resolve("bert.json");
        int exit = VmmkitCli.commandLine().setOut(new PrintWriter(new StringWriter()))
                .execute("replay", "--driver", "host", "--warmup", "0", "--json", json.toString(), BERT.toString());
        assertEquals(0, exit);
        JsonNode report = new ObjectMapper().readTree(json.toFile());
        assertEquals(allocs, report.get("allocs").asLong());
        assertEquals(frees, report.get("frees").asLong());
        assertEquals(allocs + frees, report.get("ops").asLong());
        assertEquals(peak, report.get("peak_live_bytes").asLong(), "peak of live bytes requested");
        assertTrue(report.get("peak_reserved_bytes").asLong() >= peak, "the allocator held at least what was live");

        String documented = Files.readString(DOC);
        assertTrue(documented.contains(String.format(Locale.ROOT, "%,d ops (%,d allocs, %,d frees)",
                allocs + frees, allocs, frees)), "docs/replay.md's example counts the trace's operations");
        assertTrue(documented.contains(String.format(Locale.ROOT, "peak live %.1f MiB", peak / (double) (1 << 20))),
                "docs/replay.md's example shows the trace's peak live bytes");
    }
}
