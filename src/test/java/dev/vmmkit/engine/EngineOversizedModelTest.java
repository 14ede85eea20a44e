package dev.vmmkit.engine;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** A model larger than the whole device is refused before any loaded model is evicted. */
class EngineOversizedModelTest {
    private static final int MIB = 1 << 20;

    @Test
    void aModelThatCannotFitTheDeviceIsRefusedAndTheLoadedOnesStay(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = new EngineTestBed(root)) {
            bed.install("fixture", "1.0.0", "fixture-v1.so", "\"fx\"", "");
            bed.model("a.fx", 8 * MIB);
            bed.model("b.fx", 8 * MIB);
            bed.model("giant.fx", 40 * MIB);
            bed.start(36L * MIB, 1.0, 60_000, false, null);
            assertEquals(200, bed.generate("a", "x").status());
            assertEquals(200, bed.generate("b", "x").status());

            EngineTestBed.Answer answer = bed.generate("giant", "x");

            // The fixture engine asks for 4 KiB of scratch, then the model file's size.
            long needed = 4096 + 40L * MIB;
            assertEquals(503, answer.status());
            assertEquals("model giant cannot fit this device: loading it needs at least " + needed + " bytes (40 MiB) "
                    + "of device memory, and the device has " + 36L * MIB + " bytes (36 MiB) in all; no model was evicted",
                    answer.error());
            assertEquals(List.of("a", "b"), loadedNames(bed));
            assertEquals(0, Math.max(0, bed.metric("vmmkit_evictions_total{reason=\"load\"}")), "nothing evicted (-1: never counted)");
            assertEquals(200, bed.generate("a", "x").status(), "the loaded models still serve");
        }
    }

    private static List<String> loadedNames(EngineTestBed bed) {
        List<String> names = new ArrayList<>();
        for (JsonNode model : bed.get("/api/models").json()) names.add(model.get("name").asText());
        names.sort(null);
        return names;
    }
}
