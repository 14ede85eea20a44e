package dev.vmmkit.engine;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;

import static dev.vmmkit.engine.EngineHttpApiTest.assertError;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code --idle-policy pause} over real HTTP, engines in worker processes on the host emulation:
 * idle models are paused (device memory given back, contents kept in host memory) instead of
 * evicted, and the next request wakes them without loading the model file again. The fixture
 * engine's tokens count the calls its instance served, its "verify" prompt checks every byte of
 * its weights, and its load log has a line per engine_load_model.
 */
class EngineIdlePauseTest {
    private static final int MIB = 1 << 20;
    /** Each model: 12 MiB of weights; two do not fit the 24 MiB device together. */
    private static final int MODEL_BYTES = 12 * MIB;

    @Test
    void alternatingRequestsPauseTheIdleModelAndWakeItWithoutLoadingItAgain(@TempDir Path root) throws Exception {
        Path log = root.resolve("loads.log");
        try (EngineTestBed bed = pausingBed(root, log, null)) {
            bed.start(24L * MIB, 1.0, 3_600_000, false, null);
            assertEquals(1, firstToken(bed.generate("a", "x")));
            long usedWithA = bed.metric("vmmkit_device_used_bytes");

            // b does not fit beside a: its load pauses a rather than evicting it
            assertEquals(1, firstToken(bed.generate("b", "x")));
            JsonNode a = bed.loadedModel("a");
            assertNotNull(a, "a paused model is still listed: " + bed.get("/api/models").text());
            assertEquals("paused", a.get("status").asText());
            assertTrue(a.get("paused_bytes").asLong() >= MODEL_BYTES, a.toString());
            assertTrue(a.get("host_backup_bytes").asLong() >= MODEL_BYTES, a.toString());
            assertEquals(0, a.get("device_bytes").asLong(), "a paused model holds no device memory");
            assertEquals("loaded", bed.loadedModel("b").get("status").asText());
            assertTrue(bed.metric("vmmkit_device_used_bytes") <= usedWithA + 2 * MIB,
                    "only one model's memory is on the device: " + bed.get("/metrics").text());

            // the requests alternate: each wakes its model (the instance that served before) and pauses the other
            assertEquals(2, firstToken(bed.generate("a", "x")), "the same instance serves on: no new load");
            assertEquals(200, bed.generate("a", "verify").status(), "the weights came back bit for bit");
            assertEquals("paused", bed.loadedModel("b").get("status").asText());
            assertEquals(2, firstToken(bed.generate("b", "x")));
            assertEquals(200, bed.generate("b", "verify").status());
            assertEquals(4, firstToken(bed.generate("a", "x")));

            assertEquals(List.of("a.fx", "b.fx"), loads(log), "each model file was loaded once");
            assertEquals(0, bed.metric("vmmkit_evictions_total{reason=\"load\"}"));
            assertEquals(2, bed.metric("vmmkit_model_pauses_total{model=\"a\"}"));
            assertEquals(2, bed.metric("vmmkit_model_resumes_total{model=\"a\"}"));
            assertEquals(2, bed.metric("vmmkit_model_pauses_total{model=\"b\"}"));
            assertEquals(1, bed.metric("vmmkit_model_resumes_total{model=\"b\"}"));
            assertEquals(1, bed.metric("vmmkit_models_paused"));
            JsonNode b = bed.loadedModel("b");
            assertEquals(2, b.get("pauses").asLong());
            assertEquals(1, b.get("resumes").asLong());
        }
    }

    @Test
    void theMonitorPausesIdleModelsNeverABusyOneAndTheFiguresDropByTheirBytes(@TempDir Path root) throws Exception {
        Path log = root.resolve("loads.log");
        Path hooks = root.resolve("hooks");
        try (EngineHooks held = EngineHooks.open(hooks, "a"); EngineTestBed bed = pausingBed(root, log, hooks)) {
            bed.model("c.fx", MODEL_BYTES);
            // 64 MiB device, 30 %: three models are past it; the monitor runs when the test says
            bed.start(64L * MIB, 0.3, 3_600_000, false, null);
            assertEquals(200, bed.generate("a", "x").status());
            assertEquals(200, bed.generate("b", "x").status());
            assertEquals(200, bed.generate("c", "x").status());
            CompletableFuture<EngineTestBed.Answer> busy = CompletableFuture.supplyAsync(() -> bed.generate("a", "hold:a"));
            held.awaitEntered();
            // LRU order: a (busy), b, c
            long before = bed.metric("vmmkit_device_used_bytes");
            bed.host().monitor().pollOnce();
            long after = bed.metric("vmmkit_device_used_bytes");

            assertEquals("loaded", bed.loadedModel("a").get("status").asText(), "the busy model is never paused");
            assertEquals("paused", bed.loadedModel("b").get("status").asText());
            assertEquals("paused", bed.loadedModel("c").get("status").asText());
            assertTrue(before - after >= 2L * MODEL_BYTES, "two models' bytes left the device: " + before + " -> " + after);
            assertEquals(0, bed.metric("vmmkit_evictions_total{reason=\"vram\"}"));
            assertEquals(2, bed.metric("vmmkit_models_paused"));
            assertTrue(bed.metric("vmmkit_paused_host_bytes") >= 2L * MODEL_BYTES);
            assertTrue(bed.metric("vmmkit_model_paused_bytes{model=\"b\"}") >= MODEL_BYTES);

            held.release();
            assertEquals(200, busy.get().status(), "the busy request finished normally");
            assertEquals(2, firstToken(bed.generate("b", "x")), "b woke where it was");
            assertEquals(200, bed.generate("c", "verify").status());
            assertEquals(List.of("a.fx", "b.fx", "c.fx"), loads(log));
        }
    }

    @Test
    void anEnginesOwnCudaAllocationsArePausedWithItsModel(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = new EngineTestBed(root).workers(Duration.ofSeconds(120)).pauseIdleModels(1L << 30)) {
            bed.install("cudafix", "1.0.0", "fixture-cuda.so", "\"cf\"", ",\"options\":{\"cuda_load_mib\":8}");
            bed.model("m.cf", MIB);
            bed.start(64L * MIB, 0.05, 3_600_000, false, null);
            long baseline = bed.metric("vmmkit_device_used_bytes");
            assertEquals(200, bed.generate("m", "x").status());
            assertEquals(200, bed.generate("m", "cuda:4").status(), "a cudaMalloc inside engine_generate");
            long held = MIB + 4096 + 12L * MIB; // alloc_device's weights and scratch, 8 + 4 MiB through cudaMalloc
            assertEquals(held, bed.loadedModel("m").get("device_bytes").asLong());

            bed.host().monitor().pollOnce();
            JsonNode m = bed.loadedModel("m");
            assertEquals("paused", m.get("status").asText());
            assertEquals(0, m.get("device_bytes").asLong(), "every allocation, the engine's own included, carried the tag");
            assertTrue(m.get("paused_bytes").asLong() >= held, m.toString());
            assertTrue(bed.metric("vmmkit_device_used_bytes") <= baseline + 2 * MIB, bed.get("/metrics").text());

            assertEquals(200, bed.generate("m", "x").status());
            assertEquals(held, bed.loadedModel("m").get("device_bytes").asLong());
        }
    }

    @Test
    void aPauseThatFailsEvictsTheModelInstead(@TempDir Path root) throws Exception {
        Path log = root.resolve("loads.log");
        System.setProperty(WorkerModelTag.PAUSE_FAULT_PROPERTY, "unmap"); // read as each worker starts
        try (EngineTestBed bed = pausingBed(root, log, null)) {
            bed.start(24L * MIB, 1.0, 3_600_000, false, null);
            assertEquals(200, bed.generate("a", "x").status());
            assertEquals(200, bed.generate("b", "x").status(), "b loaded after a was evicted");
            assertNull(bed.loadedModel("a"), bed.get("/api/models").text());
            assertEquals(1, bed.metric("vmmkit_model_pause_failures_total{model=\"a\"}"));
            assertEquals(1, bed.metric("vmmkit_evictions_total{reason=\"load\"}"));
            assertEquals(0, bed.metric("vmmkit_models_paused"));
            assertEquals(1, firstToken(bed.generate("a", "x")), "a loaded afresh");
            assertEquals(List.of("a.fx", "b.fx", "a.fx"), loads(log));
        } finally {
            System.clearProperty(WorkerModelTag.PAUSE_FAULT_PROPERTY);
        }
    }

    @Test
    void aResumeWithoutDeviceMemoryAnswers503AndKeepsTheModelPaused(@TempDir Path root) throws Exception {
        Path log = root.resolve("loads.log");
        Path hooks = root.resolve("hooks");
        try (EngineHooks held = EngineHooks.open(hooks, "b"); EngineTestBed bed = pausingBed(root, log, hooks)) {
            bed.start(24L * MIB, 1.0, 3_600_000, false, null);
            assertEquals(200, bed.generate("a", "x").status());
            assertEquals(200, bed.generate("b", "x").status());
            CompletableFuture<EngineTestBed.Answer> busy = CompletableFuture.supplyAsync(() -> bed.generate("b", "hold:b"));
            held.awaitEntered();

            assertError(bed.generate("a", "x"), 503, "is paused and cannot resume");
            assertEquals("paused", bed.loadedModel("a").get("status").asText(), "still paused, its contents kept");
            assertEquals(1, bed.metric("vmmkit_model_resume_failures_total{model=\"a\"}"));

            held.release();
            assertEquals(200, busy.get().status());
            assertEquals(2, firstToken(bed.generate("a", "x")), "woken once b was idle, without loading again");
            assertEquals(200, bed.generate("a", "verify").status());
            assertEquals(List.of("a.fx", "b.fx"), loads(log));
        }
    }

    @Test
    void aPausedWorkerThatDiesIsHandledAsAnyCrash(@TempDir Path root) throws Exception {
        Path log = root.resolve("loads.log");
        try (EngineTestBed bed = pausingBed(root, log, null)) {
            bed.start(24L * MIB, 1.0, 3_600_000, false, null);
            assertEquals(200, bed.generate("a", "x").status());
            assertEquals(200, bed.generate("b", "x").status());
            JsonNode a = bed.loadedModel("a");
            assertEquals("paused", a.get("status").asText());
            long pid = a.get("worker_pid").asLong();
            ProcessHandle worker = ProcessHandle.of(pid).orElseThrow();
            worker.destroyForcibly();
            worker.onExit().get();

            EngineTestBed.Answer again = bed.generate("a", "x");
            assertEquals(200, again.status(), again.text());
            assertEquals(1, firstToken(again), "a fresh instance");
            assertNotEquals(pid, bed.loadedModel("a").get("worker_pid").asLong());
            assertEquals(List.of("a.fx", "b.fx", "a.fx"), loads(log));
        }
    }

    @Test
    void withTooLittleHostMemoryForTheCopyTheModelIsEvicted(@TempDir Path root) throws Exception {
        Path log = root.resolve("loads.log");
        try (EngineTestBed bed = pausingBed(root, log, null)) {
            bed.pauseIdleModels(MODEL_BYTES - 1); // less than one model's copy
            bed.start(24L * MIB, 1.0, 3_600_000, false, null);
            assertEquals(200, bed.generate("a", "x").status());
            assertEquals(200, bed.generate("b", "x").status());
            assertNull(bed.loadedModel("a"));
            assertEquals(1, bed.metric("vmmkit_evictions_total{reason=\"load\"}"));
            assertEquals(-1, bed.metric("vmmkit_model_pauses_total{model=\"a\"}"), "no pause was tried");
        }
    }

    /** Models a and b (12 MiB each) on the fixture engine in workers, with a load log (and hooks when given). */
    private static EngineTestBed pausingBed(Path root, Path log, Path hooks) throws IOException {
        EngineTestBed bed = new EngineTestBed(root).workers(Duration.ofSeconds(120)).pauseIdleModels(1L << 30);
        bed.install("fixture", "1.0.0", "fixture-v1.so", "\"fx\"", ",\"options\":{\"load_log\":\"" + log + "\""
                + (hooks == null ? "" : ",\"hook_dir\":\"" + hooks + "\"") + "}");
        bed.model("a.fx", MODEL_BYTES);
        bed.model("b.fx", MODEL_BYTES);
        return bed;
    }

    private static int firstToken(EngineTestBed.Answer answer) {
        assertEquals(200, answer.status(), answer.text());
        return answer.json().get("tokens").get(0).get("id").asInt();
    }

    /** The model files loaded so far, in order (file names). */
    private static List<String> loads(Path log) throws IOException {
        if (!Files.exists(log)) return List.of();
        return Files.readAllLines(log).stream().map(line -> Path.of(line).getFileName().toString()).toList();
    }
}
