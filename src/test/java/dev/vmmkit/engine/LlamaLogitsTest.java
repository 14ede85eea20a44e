package dev.vmmkit.engine;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The llama engine's per-token arithmetic over the vocabulary (examples/llama-engine/logits.c,
 * built with the engine's own flags) against reference code, in a C program of its own
 * (src/test/c/logits_test.c): it needs no llama.cpp, so it runs wherever the build does.
 */
class LlamaLogitsTest {
    private static final Path PROGRAM = Path.of("target", "test-native", "logits_test").toAbsolutePath();

    @Test
    void topValuesCopyAndLogSumExpMatchTheReference() throws IOException, InterruptedException {
        Process process = new ProcessBuilder(PROGRAM.toString()).redirectErrorStream(true).start();
        String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(process.waitFor(60, TimeUnit.SECONDS), "logits_test did not finish");
        assertEquals(0, process.exitValue(), output);
        assertEquals("logits_test: ok", output.strip());
    }
}
