package dev.vmmkit.engine;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** A generate request's fields: a missing one is called missing, a wrong one is named with its value. */
class EngineRequestFieldsTest {

    @Test
    void eachFieldIsNamedAndAMissingOneIsCalledMissing(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = new EngineTestBed(root)) {
            bed.start();

            assertError(bed.post("/api/generate", "{\"prompt\":\"x\"}"), "\"model\" is missing");
            assertError(bed.post("/api/generate", "{\"model\":\"a\"}"), "\"prompt\" is missing");
            assertError(bed.post("/api/generate", "{\"model\":7,\"prompt\":\"x\"}"), "\"model\" must be a string, not 7");
            assertError(bed.post("/api/generate", "{\"model\":\"a\",\"prompt\":null}"), "\"prompt\" must be a string, not null");
        }
    }

    private static void assertError(EngineTestBed.Answer answer, String error) {
        assertEquals(400, answer.status(), answer.text());
        assertEquals(error, answer.error());
    }
}
