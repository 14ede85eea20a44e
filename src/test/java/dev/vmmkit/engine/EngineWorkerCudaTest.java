package dev.vmmkit.engine;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.time.Duration;

import static dev.vmmkit.engine.EngineHttpApiTest.assertError;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * An engine that calls CUDA itself, in a worker under vmmkit's shim, through real HTTP: its
 * cudaMalloc is served by the worker's allocator (on the host emulation, as {@code vmmkit run
 * --driver host} serves a program), counted for its model in {@code /api/models} and
 * {@code /metrics}, given back by unload and by a crash, and a load whose cudaMalloc finds no
 * memory evicts an idle model and retries. The fixture ({@code fixture-cuda.so}) is linked against
 * the stand-in CUDA runtime, which would serve the calls from host memory that no figure counts:
 * a model's bytes include them only when vmmkit served them.
 */
class EngineWorkerCudaTest {
    private static final long MIB = 1 << 20;
    private static final Duration LONG = Duration.ofSeconds(300);

    private static void installCudaFixture(EngineTestBed bed, String options) throws Exception {
        bed.install("cudafix", "1.0.0", "fixture-cuda.so", "\"cf\"", ",\"options\":{" + options + "}");
    }

    private static long modelMetric(EngineTestBed bed, String model) {
        return bed.metric("vmmkit_model_device_bytes{model=\"" + model + "\",engine=\"cudafix\",version=\"1.0.0\"}");
    }

    @Test
    void anEnginesOwnCudaAllocationsAreServedCountedForItsModelAndFreedByUnload(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = new EngineTestBed(root)) {
            installCudaFixture(bed, "\"cuda_load_mib\":8");
            bed.model("m.cf", (int) MIB);
            bed.workers(LONG).start();
            long baseline = bed.metric("vmmkit_device_used_bytes");

            EngineTestBed.Answer answer = bed.generate("m", "x");
            assertEquals(200, answer.status(), answer.text());
            long loaded = MIB + 4096 + 8 * MIB; // weights + scratch through alloc_device, 8 MiB through cudaMalloc
            assertEquals(loaded, bed.loadedModel("m").get("device_bytes").asLong(), bed.get("/api/models").text());
            assertEquals(loaded, modelMetric(bed, "m"));
            assertTrue(bed.metric("vmmkit_device_used_bytes") >= baseline + loaded, "the host's device figures include them");

            assertEquals(200, bed.generate("m", "cuda:4").status(), "a cudaMalloc inside engine_generate");
            assertEquals(loaded + 4 * MIB, modelMetric(bed, "m"));

            assertEquals(200, bed.delete("/api/models/m").status());
            assertEquals(baseline, bed.metric("vmmkit_device_used_bytes"), "unload gives all of it back, leaked or not");
        }
    }

    @Test
    void aCrashGivesTheEnginesOwnCudaMemoryBack(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = new EngineTestBed(root)) {
            installCudaFixture(bed, "\"cuda_load_mib\":8,\"fault\":\"segv\",\"fault_in\":\"generate\"");
            bed.install("fixture", "1.0.0", "fixture-v1.so", "\"fx\"", "");
            bed.model("m.cf", (int) MIB);
            bed.model("good.fx", (int) MIB);
            bed.workers(LONG).start();
            assertEquals(200, bed.generate("good", "x").status());
            long baseline = bed.metric("vmmkit_device_used_bytes");

            assertEquals(200, bed.generate("m", "cuda:6").status());
            assertEquals(MIB + 4096 + 14 * MIB, modelMetric(bed, "m"));
            assertError(bed.generate("m", "crash"), 502, "SIGSEGV");
            assertEquals(baseline, bed.metric("vmmkit_device_used_bytes"), "the crashed worker's memory went with it");
            assertEquals(200, bed.generate("good", "after").status());

            EngineTestBed.Answer again = bed.generate("m", "x");
            assertEquals(200, again.status(), again.text());
            assertEquals(MIB + 4096 + 8 * MIB, modelMetric(bed, "m"), "a fresh worker, counted afresh");
        }
    }

    @Test
    void aLoadWhoseOwnCudaMallocFindsNoMemoryEvictsAnIdleModelAndRetries(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = new EngineTestBed(root)) {
            installCudaFixture(bed, "\"cuda_load_mib\":28");
            bed.install("fixture", "1.0.0", "fixture-v1.so", "\"fx\"", "");
            bed.model("b.fx", (int) (8 * MIB));
            bed.model("c.fx", (int) (8 * MIB));
            bed.model("big.cf", (int) MIB);
            // 48 MiB device: b and c take 10 MiB each (weights, and a 2 MiB page for the scratch buffer),
            // so big's 30 MiB (a 2 MiB page for weights and scratch, 28 MiB through cudaMalloc) fit
            // only once one of them is gone.
            bed.workers(LONG).start(48 * MIB, 1.0, 3_600_000, false, null);
            assertEquals(200, bed.generate("b", "x").status());
            assertEquals(200, bed.generate("c", "x").status());

            EngineTestBed.Answer answer = bed.generate("big", "x");
            assertEquals(200, answer.status(), answer.text());
            assertEquals(1, bed.metric("vmmkit_evictions_total{reason=\"load\"}"));
            assertNull(bed.loadedModel("b"), "the least recently used idle model went");
            assertNotNull(bed.loadedModel("c"));
            JsonNode big = bed.loadedModel("big");
            assertEquals(MIB + 4096 + 28 * MIB, big.get("device_bytes").asLong());
        }
    }
}
