package dev.vmmkit.tools;

import dev.vmmkit.trace.TestTraces;
import org.junit.jupiter.api.Test;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The example output in docs/replay.md is the current build's: the BERT trace replayed on the host
 * emulation gives the same first three lines (counts, memory, driver calls: they do not depend on
 * timing), a fourth line of the same form, and the same fifth (driver handles and their model).
 */
class DocsExampleTest {
    private static final Path DOC = Path.of("docs", "replay.md");
    private static final Path BERT = TestTraces.BERT;
    private static final String MARK = "<!-- replay-example -->";

    @Test
    void theReplayExampleIsTheCurrentOutput() throws Exception {
        assertTrue(Files.isReadable(BERT), "the repository ships " + BERT);
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
}
