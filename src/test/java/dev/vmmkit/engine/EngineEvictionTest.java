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
import static org.junit.jupiter.api.Assertions.fail;

/** Eviction by the resource monitor and by loads that find no device memory, with a busy model. */
class EngineEvictionTest {
    private static final int MIB = 1 << 20;

    @Test
    void monitorEvictsTheLeastRecentlyUsedIdleModelNeverABusyOne(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = new EngineTestBed(root)) {
            installSlowAndFixturePlugins(bed);
            bed.model("a.sl", 8 * MIB);
            bed.model("b.fx", 8 * MIB);
            bed.model("c.fx", 8 * MIB);
            bed.model("d.fx", 8 * MIB);
            // 64 MiB device, 45 %: a, b, c (24 MiB + a shared 2 MiB page) fit; d tips it over.
            bed.start(64L * MIB, 0.45, 40, false, null);
            bed.host().registry().acquire("a").close(); // loads a without the 3 s request
            Thread.sleep(5);
            assertEquals(200, bed.generate("b", "x").status());
            assertEquals(200, bed.generate("c", "x").status());
            CompletableFuture<EngineTestBed.Answer> busy = CompletableFuture.supplyAsync(() -> bed.generate("a", "slow"));
            awaitInFlight(bed, "a");
            // LRU order is now a (busy), b, c.
            assertEquals(200, bed.generate("d", "x").status());
            awaitGone(bed, "b");
            assertNotNull(bed.loadedModel("a"), "the busy model stays although it is least recently used");
            assertNotNull(bed.loadedModel("c"));
            assertNotNull(bed.loadedModel("d"));
            assertEquals(1, bed.metric("vmmkit_evictions_total{reason=\"vram\"}"));
            assertEquals(200, busy.get().status(), "the busy request finished normally");
        }
    }

    @Test
    void aLoadWithoutMemoryEvictsIdleModelsThenAnswers503(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = new EngineTestBed(root)) {
            installSlowAndFixturePlugins(bed);
            bed.model("a.sl", 8 * MIB);
            bed.model("b.fx", 8 * MIB);
            bed.model("c.fx", 8 * MIB);
            bed.model("big.fx", 20 * MIB);
            bed.model("huge.fx", 28 * MIB);
            bed.start(36L * MIB, 1.0, 60_000, false, null);
            bed.host().registry().acquire("a").close();
            Thread.sleep(5);
            assertEquals(200, bed.generate("b", "x").status());
            Thread.sleep(5);
            assertEquals(200, bed.generate("c", "x").status());
            CompletableFuture<EngineTestBed.Answer> busy = CompletableFuture.supplyAsync(() -> bed.generate("a", "slow"));
            awaitInFlight(bed, "a");

            // 26 MiB used of 36: big (20 MiB) needs b and c gone; a is busy and stays.
            assertEquals(200, bed.generate("big", "x").status());
            assertEquals(List.of("a", "big"), loadedNames(bed));
            assertEquals(2, bed.metric("vmmkit_evictions_total{reason=\"load\"}"));

            // huge (28 MiB) would need a gone too, but a is busy: big goes, then 503.
            assertError(bed.generate("huge", "x"), 503, "no idle model left to evict");
            assertEquals(List.of("a"), loadedNames(bed));
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

    private static void awaitInFlight(EngineTestBed bed, String name) throws InterruptedException {
        for (int i = 0; i < 1000; i++) {
            JsonNode model = bed.loadedModel(name);
            if (model != null && model.get("in_flight").asInt() > 0) return;
            Thread.sleep(5);
        }
        fail(name + " never had a request in flight");
    }

    private static void awaitGone(EngineTestBed bed, String name) throws InterruptedException {
        for (int i = 0; i < 1000; i++) {
            if (bed.loadedModel(name) == null) return;
            Thread.sleep(5);
        }
        fail(name + " was never evicted: " + bed.get("/api/models").text());
    }

    /** The plugins both eviction tests load: "sl" models answer after 3 s (a busy model), "fx" at once. */
    private static void installSlowAndFixturePlugins(EngineTestBed bed) throws Exception {
        bed.install("slow", "1.0.0", "fixture-slow.so", "\"sl\"", ",\"options\":{\"delay_ms\":3000}");
        bed.install("fixture", "1.0.0", "fixture-v1.so", "\"fx\"", "");
    }
}
