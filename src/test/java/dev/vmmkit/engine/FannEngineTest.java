package dev.vmmkit.engine;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * A plugin over a real inference library: FANN (examples/fann-engine), serving a tiny character
 * model that this test trains itself. Skipped, saying why, where libfann-dev is not installed.
 */
class FannEngineTest {
    private static final Path FANN = EngineTestBed.FIXTURES.resolve("fann");
    private static final String ALPHABET = " abcdefghijklmnopqrstuvwxyz";

    @Test
    void generatesFromAModelTrainedHere(@TempDir Path root) throws Exception {
        assumeTrue(Files.isRegularFile(FANN.resolve("cpu/libfann_engine.so")),
                "libfann-dev is not installed, so the FANN engine was not built (scripts/install-test-deps.sh, run by ./vmmkit test as root, installs it)");
        try (EngineTestBed bed = new EngineTestBed(root)) {
            Path plugin = Files.createDirectories(bed.engines.resolve("fann/cpu"));
            Files.copy(FANN.resolve("cpu/libfann_engine.so"), plugin.resolve("libfann_engine.so"));
            Files.copy(Path.of("examples/fann-engine/manifest.json"), plugin.resolve("manifest.json"));
            // The model: every letter followed by the next one, "z" by a space, a space by "a".
            Process train = new ProcessBuilder(FANN.resolve("fann_make_model").toString(),
                    bed.models.resolve("abc.net").toString(), ALPHABET.substring(1) + " ")
                    .redirectErrorStream(true).start();
            String trained = new String(train.getInputStream().readAllBytes());
            assertTrue(train.waitFor(60, TimeUnit.SECONDS) && train.exitValue() == 0, trained);
            Files.writeString(bed.models.resolve("abc.json"), "{\"architecture\": \"fann-charlm\"}");
            bed.start();

            EngineTestBed.Answer answer = bed.generate("abc", "hello wor");
            assertEquals(200, answer.status(), answer.text());
            assertEquals("fann", answer.json().get("engine").asText());
            StringBuilder text = new StringBuilder();
            for (JsonNode token : answer.json().get("tokens")) {
                text.append(ALPHABET.charAt(token.get("id").asInt()));
                assertEquals(27, token.get("logprobs").size());
                double total = 0;
                for (JsonNode p : token.get("logprobs")) total += Math.exp(p.asDouble());
                assertEquals(1.0, total, 1e-3, "logprobs are a distribution");
            }
            assertEquals("stuvwxyz", text.toString(), "after 'r' the model continues the alphabet");
            assertTrue(bed.loadedModel("abc").get("device_bytes").asLong() > 0, "weights mirrored in device memory");
        }
    }
}
