package dev.vmmkit.engine;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.time.Duration;

import static dev.vmmkit.engine.EngineHttpApiTest.assertError;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * With worker isolation the host probes each plugin (loading it and calling engine_get_info) in a
 * worker: a plugin that segfaults there is refused with what happened, on discovery and on reload,
 * and the host keeps serving the others.
 */
class EngineProbeTest {
    private static final Duration LONG = Duration.ofSeconds(300);

    @Test
    void aPluginThatCrashesInEngineGetInfoIsRefusedAndTheHostServesTheOthers(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = new EngineTestBed(root)) {
            bed.install("infocrash", "1.0.0", "fixture-infocrash.so", "\"ic\"", "");
            bed.install("fixture", "1.0.0", "fixture-v1.so", "\"fx\"", "");
            bed.model("victim.ic", 4096);
            bed.model("good.fx", 4096);
            bed.workers(LONG).start();

            JsonNode refused = bed.engine("infocrash");
            assertEquals("rejected", refused.get("status").asText(), refused.toString());
            String reason = refused.get("reason").asText();
            assertTrue(reason.contains("engine_get_info") && reason.contains("SIGSEGV"), reason);
            assertEquals("available", bed.engine("fixture").get("status").asText());
            EngineTestBed.Answer served = bed.generate("good", "x");
            assertEquals(200, served.status(), served.text());
            assertError(bed.generate("victim", "x"), 404, "no available engine");

            EngineTestBed.Answer reload = bed.post("/api/engines/infocrash/reload", "");
            assertError(reload, 500, "SIGSEGV");
            assertEquals(200, bed.generate("good", "after").status(), "the host outlived both probes");
        }
    }
}
