package dev.vmmkit.tools.demo;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.vmmkit.tools.VmmkitCli;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The demos on the host emulation: the MLP meets its promises in paranoid mode, and every kernel agrees with itself. */
class DemoCommandTest {

    @AfterEach
    void resetLevel() {
        System.clearProperty("vmmkit.leakDetection");
    }

    @Test
    void theMlpLearnsReturnsToBaselineAfterEveryStepAndLeaksNothing(@TempDir Path dir) throws IOException {
        System.setProperty("vmmkit.leakDetection", "paranoid");
        Path json = dir.resolve("mlp.json");
        StringWriter out = new StringWriter();
        int exit = run(out, "demo", "mlp", "--driver", "host", "--steps", "8", "--batch", "32", "--inputs", "16",
                "--hidden", "64", "--classes", "4", "--lr", "0.2", "--json", json.toString());
        assertEquals(0, exit, out.toString());
        assertTrue(out.toString().contains("OK: loss fell"), out.toString());
        JsonNode report = new ObjectMapper().readTree(json.toFile());
        assertEquals("paranoid", report.get("leak_detection").asText());
        assertEquals(8, report.get("losses").size());
        assertTrue(report.get("losses").get(7).asDouble() < report.get("losses").get(0).asDouble());
        long baseline = report.get("baseline_live_bytes").asLong();
        // parameters (16*64 + 64 + 64*4 + 4 floats) and data (32*16 inputs + 32 labels)
        assertEquals(4L * (16 * 64 + 64 + 64 * 4 + 4 + 32 * 16 + 32), baseline);
        for (JsonNode live : report.get("live_bytes_after_step")) assertEquals(baseline, live.asLong());
        // The backward pass's peak: at relu's backward, its input, the incoming and outgoing
        // gradients (3 x batch x hidden), the second layer's weight and bias gradients, and the loss.
        long expectedPeak = baseline + 4L * (3 * 32 * 64 + 64 * 4 + 4 + 1);
        assertEquals(expectedPeak, report.get("peak_live_bytes").asLong());
        assertEquals(0, report.get("leaks").asLong());
    }

    @Test
    void everyHostKernelAgreesWithTheReference() {
        StringWriter out = new StringWriter();
        assertEquals(0, run(out, "demo", "ops-check", "--driver", "host"), out.toString());
        assertTrue(out.toString().strip().endsWith("passed, 0 failed"), out.toString());
    }

    private static int run(StringWriter out, String... args) {
        CommandLine cli = VmmkitCli.commandLine();
        cli.setOut(new PrintWriter(out, true));
        cli.setErr(new PrintWriter(out, true));
        return cli.execute(args);
    }
}
