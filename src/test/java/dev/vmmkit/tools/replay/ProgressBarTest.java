package dev.vmmkit.tools.replay;

import org.junit.jupiter.api.Test;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ProgressBarTest {

    @Test
    void silentWhenStandardErrorIsNotATerminal() {
        // Under the build, stderr is a pipe or a file.
        assertTrue(!ProgressBar.stderrIsTerminal());
        assertNull(ProgressBar.onTerminal(new PrintWriter(new StringWriter()), "t", 1_000_000));
    }

    @Test
    void drawsInPlaceAfterAQuietStartAndClearsItsLineAtTheEnd() {
        StringWriter out = new StringWriter();
        AtomicLong nanos = new AtomicLong(7_000_000_000L);
        ProgressBar bar = new ProgressBar(new PrintWriter(out), "big.csv", 1_000, nanos::get);
        int op = bar.first();
        assertEquals(4, op, "called every ops/200 operations");
        nanos.addAndGet((ProgressBar.QUIET_MILLIS - 1) * 1_000_000);
        op = bar.afterOp(op, null);
        assertEquals("", out.toString(), "nothing in the first " + ProgressBar.QUIET_MILLIS + " ms");
        nanos.addAndGet(1_000_000);
        int calls = 1;
        while (op >= 0) {
            op = bar.afterOp(op, null);
            calls++;
        }
        assertEquals(200, calls);
        String text = out.toString();
        assertTrue(text.startsWith("\rbig.csv [") && text.contains("% "), text);
        assertTrue(text.contains(" 99% 995/1,000 ops"), text);
        assertTrue(text.endsWith(" ".repeat(bar.line(1_000).length()) + "\r"), "the line is cleared for the summary");
    }

    @Test
    void lineShowsTheShareDone() {
        assertEquals("t [###############...............]  50% 500/1,000 ops", new ProgressBar(null, "t", 1_000).line(500));
    }
}
