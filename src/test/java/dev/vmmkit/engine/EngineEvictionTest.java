package dev.vmmkit.engine;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

import static dev.vmmkit.engine.EngineHttpApiTest.assertError;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

/** Eviction by the resource monitor and by loads that find no device memory, with a busy model. */
class EngineEvictionTest {
    private static final int MIB = 1 << 20;

    @Test
    void monitorEvictsTheLeastRecentlyUsedIdleModelNeverABusyOne(@TempDir Path root) throws Exception {
        Path hooks = root.resolve("hooks");
        try (EngineTestBed bed = new EngineTestBed(root); EngineHooks held = EngineHooks.open(hooks, "a")) {
            installHoldingAndFixturePlugins(bed, hooks);
            bed.model("a.sl", 8 * MIB);
            bed.model("b.fx", 8 * MIB);
            bed.model("c.fx", 8 * MIB);
            bed.model("d.fx", 8 * MIB);
            // 64 MiB device, 45 %: a, b, c (24 MiB + a shared 2 MiB page) fit; d tips it over.
            // The monitor runs when the test says (pollOnce), not on a timer.
            bed.start(64L * MIB, 0.45, 3_600_000, false, null);
            bed.host().registry().acquire("a").close(); // loads a without a request
            assertEquals(200, bed.generate("b", "x").status());
            assertEquals(200, bed.generate("c", "x").status());
            CompletableFuture<EngineTestBed.Answer> busy = CompletableFuture.supplyAsync(() -> bed.generate("a", "hold:a"));
            held.awaitEntered();
            // LRU order is now a (busy), b, c.
            assertEquals(200, bed.generate("d", "x").status());
            bed.host().monitor().pollOnce();
            assertNull(bed.loadedModel("b"), bed.get("/api/models").text());
            assertNotNull(bed.loadedModel("a"), "the busy model stays although it is least recently used");
            assertNotNull(bed.loadedModel("c"));
            assertNotNull(bed.loadedModel("d"));
            assertEquals(1, bed.metric("vmmkit_evictions_total{reason=\"vram\"}"));
            held.release();
            assertEquals(200, busy.get().status(), "the busy request finished normally");
        }
    }

    @Test
    void aLoadWithoutMemoryEvictsIdleModelsThenAnswers503(@TempDir Path root) throws Exception {
        Path hooks = root.resolve("hooks");
        try (EngineTestBed bed = new EngineTestBed(root); EngineHooks held = EngineHooks.open(hooks, "a")) {
            installHoldingAndFixturePlugins(bed, hooks);
            bed.model("a.sl", 8 * MIB);
            bed.model("b.fx", 8 * MIB);
            bed.model("c.fx", 8 * MIB);
            bed.model("big.fx", 20 * MIB);
            bed.model("huge.fx", 28 * MIB);
            bed.start(36L * MIB, 1.0, 60_000, false, null);
            bed.host().registry().acquire("a").close();
            assertEquals(200, bed.generate("b", "x").status());
            assertEquals(200, bed.generate("c", "x").status());
            CompletableFuture<EngineTestBed.Answer> busy = CompletableFuture.supplyAsync(() -> bed.generate("a", "hold:a"));
            held.awaitEntered();

            // 26 MiB used of 36: big (20 MiB) needs b and c gone; a is busy and stays.
            assertEquals(200, bed.generate("big", "x").status());
            assertEquals(List.of("a", "big"), loadedNames(bed));
            assertEquals(2, bed.metric("vmmkit_evictions_total{reason=\"load\"}"));

            // huge (28 MiB) would need a gone too, but a is busy: big goes, then 503.
            assertError(bed.generate("huge", "x"), 503, "no idle model left to evict");
            assertEquals(List.of("a"), loadedNames(bed));
            held.release();
            assertEquals(200, busy.get().status());
            assertNull(bed.loadedModel("huge"));
        }
    }

    @Test
    void modelsOfAnEngineUnderReloadAreNotEvicted(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = new EngineTestBed(root)) {
            bed.install("fixture", "1.0.0", "fixture-v1.so", "\"fx\"", "");
            bed.model("a.fx", MIB);
            bed.start();
            assertEquals(200, bed.generate("a", "x").status());
            EngineEntry entry = bed.host().catalog().withId("fixture").getFirst();
            entry.reloading(true); // as during a shadow reload, when each model briefly has two instances
            assertEquals(java.util.Optional.empty(), bed.host().registry().evictLeastRecentlyUsedIdle("vram", null));
            entry.reloading(false);
            assertEquals(true, bed.host().registry().evictLeastRecentlyUsedIdle("vram", null).isPresent());
            assertNull(bed.loadedModel("a"));
        }
    }

    private static List<String> loadedNames(EngineTestBed bed) {
        List<String> names = new ArrayList<>();
        for (JsonNode model : bed.get("/api/models").json()) names.add(model.get("name").asText());
        return names;
    }

    /**
     * The plugins both eviction tests load: "sl" models hold the prompt {@code hold:NAME} inside
     * engine_generate until the test releases it (a busy model); "fx" models answer at once.
     */
    private static void installHoldingAndFixturePlugins(EngineTestBed bed, Path hooks) throws Exception {
        bed.install("slow", "1.0.0", "fixture-slow.so", "\"sl\"", ",\"options\":{\"delay_ms\":0,\"hook_dir\":\"" + hooks + "\"}");
        bed.install("fixture", "1.0.0", "fixture-v1.so", "\"fx\"", "");
    }
}
