package dev.vmmkit.tools;

import dev.vmmkit.driver.cuda.CudaDriver;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

class DriverCheckCommandTest {

    @Test
    void everyCheckPassesOnTheHostDriver() {
        Captured run = capture("driver-check", "--driver", "host");
        String[] lines = run.out.strip().split("\n");
        String last = lines[lines.length - 1];
        assertTrue(last.matches("\\d+ passed, 0 failed"), run.out);
        assertEquals(0, run.exitCode, run.out);
        for (int i = 1; i < lines.length - 1; i++) {
            assertTrue(lines[i].startsWith("PASS "), lines[i]);
        }
    }

    @Test
    void aMissingCudaDriverIsOneClearLineAndExitCode2() {
        assumeFalse(CudaDriver.isAvailable(), "CUDA is present on this machine");
        Captured run = capture("driver-check", "--driver", "cuda");
        assertEquals(2, run.exitCode);
        assertEquals("", run.out);
        assertEquals(1, run.err.strip().lines().count(), run.err);
        assertTrue(run.err.contains("cannot open the cuda driver"), run.err);
        assertFalse(run.err.contains("\tat "), "no stack trace");
    }

    @Test
    void anUnknownDriverIsOneClearLine() {
        Captured run = capture("driver-check", "--driver", "opencl");
        assertEquals(2, run.exitCode);
        assertEquals("vmmkit driver-check: unknown driver 'opencl' (expected cuda, host or auto)", run.err.strip());
    }

    private record Captured(int exitCode, String out, String err) {
    }

    private static synchronized Captured capture(String... args) {
        PrintStream originalOut = System.out;
        PrintStream originalErr = System.err;
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        try {
            System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            int exitCode = VmmkitCli.run(args);
            return new Captured(exitCode, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
        } finally {
            System.setOut(originalOut);
            System.setErr(originalErr);
        }
    }
}
