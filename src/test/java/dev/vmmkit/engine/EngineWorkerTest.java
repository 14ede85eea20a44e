package dev.vmmkit.engine;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;

import static dev.vmmkit.engine.EngineHttpApiTest.assertError;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Engines in worker processes, through real HTTP: crashes, exits and hangs in every ABI function
 * end the worker only, the request in flight is told what happened, other models keep serving, the
 * model loads again, a crash loop marks it failed, and its device memory goes back.
 */
class EngineWorkerTest {
    private static final int MIB = 1 << 20;
    /** For the crash cases: generous, since nothing here should ever reach it. */
    private static final Duration LONG = Duration.ofSeconds(300);
    /**
     * For the hang cases: the fixture hangs for ever. The timeout covers every call of those
     * cases, the loads included (a fresh worker's JVM loads its classes then, about 1 s on a
     * 2-core machine under a load average of 25), hence the margin.
     */
    private static final Duration HANG = Duration.ofSeconds(10);

    @Test
    void servesThroughAWorkerAndGivesItsMemoryBackOnUnload(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = new EngineTestBed(root)) {
            bed.install("fixture", "1.0.0", "fixture-v1.so", "\"fx\"", "");
            bed.model("alpha.fx", 6 * MIB);
            bed.workers(LONG).start();
            long before = bed.metric("vmmkit_device_used_bytes");
            EngineTestBed.Answer answer = bed.generate("alpha", "hello");
            assertEquals(200, answer.status(), answer.text());
            assertEquals(1, answer.json().get("tokens").get(0).get("id").asInt());
            assertEquals(-1.5, answer.json().get("tokens").get(0).get("logprobs").get(1).asDouble(), 1e-6);
            JsonNode model = bed.loadedModel("alpha");
            long pid = model.get("worker_pid").asLong();
            assertNotEquals(ProcessHandle.current().pid(), pid, "the engine runs in a process of its own");
            assertTrue(ProcessHandle.of(pid).isPresent());
            assertEquals(6L * MIB + 4096, model.get("device_bytes").asLong(), "weights + scratch, through alloc_device");
            assertTrue(bed.metric("vmmkit_device_used_bytes") >= before + 6L * MIB, "the worker's memory counts in the host's figures");
            assertEquals(2, bed.generate("alpha", "again").json().get("tokens").get(0).get("id").asInt());

            assertEquals(200, bed.delete("/api/models/alpha").status());
            assertFalse(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), "the worker has exited");
            assertEquals(before, bed.metric("vmmkit_device_used_bytes"));
        }
    }

    static Stream<Arguments> faults() {
        List<Arguments> cases = new ArrayList<>();
        for (String where : List.of("init", "load", "generate", "shutdown")) {
            cases.add(Arguments.of("segv", where, "SIGSEGV"));
            cases.add(Arguments.of("abort", where, "signal 6 (SIGABRT)"));
            cases.add(Arguments.of("exit", where, "exited with status 3"));
            cases.add(Arguments.of("hang", where, "ran longer than the request timeout"));
        }
        return cases.stream();
    }

    @ParameterizedTest(name = "{0} in {1}")
    @MethodSource("faults")
    void aFaultInAnyAbiFunctionEndsOnlyItsWorker(String fault, String where, String named, @TempDir Path root) throws Exception {
        try (EngineTestBed bed = new EngineTestBed(root)) {
            bed.install("fixture", "1.0.0", "fixture-v1.so", "\"fx\"", "");
            bed.install("faulty", "1.0.0", "fixture-faulty.so", "\"bad\"",
                    ",\"options\":{\"fault\":\"" + fault + "\",\"fault_in\":\"" + where + "\"}");
            bed.model("good.fx", MIB);
            bed.model("victim.bad", 2 * MIB);
            bed.workers(fault.equals("hang") ? HANG : LONG).start();
            assertEquals(200, bed.generate("good", "warm").status());
            long baseline = bed.metric("vmmkit_device_used_bytes");

            try (Clients clients = new Clients(bed, "good", 2)) {
                clients.awaitServing();
                switch (where) {
                    case "init", "load" -> {
                        EngineTestBed.Answer answer = bed.generate("victim", "x");
                        assertError(answer, fault.equals("hang") ? 504 : 502, named);
                        assertTrue(answer.error().contains("loading the model"), answer.error());
                        assertNull(bed.loadedModel("victim"));
                    }
                    case "generate" -> {
                        assertEquals(200, bed.generate("victim", "x").status());
                        long workerPid = bed.loadedModel("victim").get("worker_pid").asLong();
                        EngineTestBed.Answer answer = bed.generate("victim", "crash");
                        assertError(answer, fault.equals("hang") ? 504 : 502, named);
                        assertTrue(answer.error().contains("engine_generate"), answer.error());
                        assertEquals(baseline, bed.metric("vmmkit_device_used_bytes"), "the crashed worker's memory is gone");
                        EngineTestBed.Answer again = bed.generate("victim", "x");
                        assertEquals(200, again.status(), again.text());
                        assertEquals(1, again.json().get("tokens").get(0).get("id").asInt(), "a fresh instance");
                        assertNotEquals(workerPid, bed.loadedModel("victim").get("worker_pid").asLong());
                        assertEquals(1, bed.metric("vmmkit_model_restarts_total{model=\"victim\"}"));
                        assertEquals(200, bed.delete("/api/models/victim").status());
                    }
                    case "shutdown" -> {
                        assertEquals(200, bed.generate("victim", "x").status());
                        EngineTestBed.Answer unloaded = bed.delete("/api/models/victim");
                        assertEquals(200, unloaded.status(), unloaded.text());
                        assertNull(bed.loadedModel("victim"));
                    }
                    default -> throw new AssertionError(where);
                }
                clients.awaitServedAfterNow();
            }
            assertEquals(baseline, bed.metric("vmmkit_device_used_bytes"), "device memory is back where it was");
            assertEquals(1, bed.metric("vmmkit_model_crashes_total{model=\"victim\"}"));
            assertEquals(fault.equals("hang") ? 1 : -1, bed.metric("vmmkit_model_timeouts_total{model=\"victim\"}"));
            assertEquals(200, bed.generate("good", "after").status());
        }
    }

    @Test
    void aModelThatKeepsCrashingIsMarkedFailedUntilItsEngineIsReloaded(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = new EngineTestBed(root)) {
            Path plugin = bed.install("faulty", "1.0.0", "fixture-faulty.so", "\"bad\"",
                    ",\"options\":{\"fault\":\"exit\",\"fault_in\":\"load\"}");
            bed.model("victim.bad", MIB);
            bed.workers(LONG).start();
            for (int i = 0; i < ModelHealth.CRASH_LIMIT; i++) assertError(bed.generate("victim", "x"), 502, "exited with status 3");
            EngineTestBed.Answer refused = bed.generate("victim", "x");
            assertError(refused, 503, "marked failed");
            assertTrue(refused.error().contains("crashed 3 times"), refused.error());
            JsonNode listed = bed.loadedModel("victim");
            assertNotNull(listed, bed.get("/api/models").text());
            assertEquals("failed", listed.get("status").asText());
            assertTrue(listed.get("reason").asText().contains("exited with status 3"), listed.toString());
            JsonNode engine = bed.engine("faulty");
            assertEquals("victim", engine.get("failed_models").get(0).get("name").asText());
            assertEquals(3, bed.metric("vmmkit_model_crashes_total{model=\"victim\"}"));

            EngineTestBed.writeManifest(plugin, Files.readString(plugin.resolve("manifest.json"))
                    .replace("\"fault\":\"exit\"", "\"fault\":\"none\""));
            assertEquals(200, bed.post("/api/engines/faulty/reload", "").status());
            assertNull(bed.engine("faulty").get("failed_models"));
            EngineTestBed.Answer served = bed.generate("victim", "x");
            assertEquals(200, served.status(), served.text());
        }
    }

    @Test
    void aWorkerKilledFromOutsideFailsItsRequestAndTheModelLoadsAgain(@TempDir Path root) throws Exception {
        Path hooks = root.resolve("hooks");
        try (EngineTestBed bed = new EngineTestBed(root); EngineHooks held = EngineHooks.open(hooks, "a")) {
            bed.install("fixture", "1.0.0", "fixture-v1.so", "\"fx\"", ",\"options\":{\"hook_dir\":\"" + hooks + "\"}");
            bed.model("a.fx", MIB);
            bed.workers(LONG).start();
            long baseline = bed.metric("vmmkit_device_used_bytes");
            assertEquals(200, bed.generate("a", "x").status());
            long pid = bed.loadedModel("a").get("worker_pid").asLong();
            CompletableFuture<EngineTestBed.Answer> inFlight = CompletableFuture.supplyAsync(() -> bed.generate("a", "hold:a"));
            held.awaitEntered();
            assertTrue(ProcessHandle.of(pid).orElseThrow().destroyForcibly());
            assertError(inFlight.get(), 502, "killed by signal 9 (SIGKILL)");
            assertEquals(baseline, bed.metric("vmmkit_device_used_bytes"));
            EngineTestBed.Answer again = bed.generate("a", "x");
            assertEquals(200, again.status(), again.text());
            assertNotEquals(pid, bed.loadedModel("a").get("worker_pid").asLong());
        }
    }

    @Test
    void reloadSwitchesToNewWorkersAndEndsTheOldOnes(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = new EngineTestBed(root)) {
            Path plugin = bed.install("fixture", "1.0.0", "fixture-v1.so", "\"fx\"", "");
            bed.model("a.fx", MIB);
            bed.workers(LONG).start();
            assertEquals("1.0.0", bed.generate("a", "x").json().get("engine_version").asText());
            long oldPid = bed.loadedModel("a").get("worker_pid").asLong();
            EngineTestBed.overwriteInPlace(plugin.resolve("engine.so"), EngineTestBed.FIXTURES.resolve("fixture-v2.so"));
            EngineTestBed.writeManifest(plugin, Files.readString(plugin.resolve("manifest.json")).replace("1.0.0", "2.0.0"));
            assertEquals(200, bed.post("/api/engines/fixture/reload", "").status());
            EngineTestBed.Answer after = bed.generate("a", "x");
            assertEquals("2.0.0", after.json().get("engine_version").asText());
            assertEquals(2, after.json().get("tokens").get(1).get("id").asInt(), "the v2 binary answers");
            assertFalse(ProcessHandle.of(oldPid).map(ProcessHandle::isAlive).orElse(false), "the old worker has exited");
            assertEquals(-1, bed.metric("vmmkit_model_crashes_total{model=\"a\"}"), "a reload is no crash");
        }
    }

    @Test
    void theMonitorEvictsIdleWorkersNeverABusyOne(@TempDir Path root) throws Exception {
        Path hooks = root.resolve("hooks");
        try (EngineTestBed bed = new EngineTestBed(root); EngineHooks held = EngineHooks.open(hooks, "a")) {
            bed.install("fixture", "1.0.0", "fixture-v1.so", "\"fx\"", ",\"options\":{\"hook_dir\":\"" + hooks + "\"}");
            for (String name : List.of("a", "b", "c", "d")) bed.model(name + ".fx", 8 * MIB);
            // Each worker holds 8 MiB of weights and a 2 MiB page for its scratch buffer: three fit
            // under half of 64 MiB, the fourth tips it over.
            bed.workers(LONG).start(64L * MIB, 0.5, 3_600_000, false, null); // the test runs the monitor
            for (String name : List.of("a", "b", "c")) assertEquals(200, bed.generate(name, "x").status());
            CompletableFuture<EngineTestBed.Answer> busy = CompletableFuture.supplyAsync(() -> bed.generate("a", "hold:a"));
            held.awaitEntered();
            // LRU order is now a (busy), b, c.
            assertEquals(200, bed.generate("d", "x").status());
            bed.host().monitor().pollOnce();
            assertNull(bed.loadedModel("b"), bed.get("/api/models").text());
            assertNotNull(bed.loadedModel("a"), "the busy model stays although it is least recently used");
            assertNotNull(bed.loadedModel("c"));
            held.release();
            assertEquals(200, busy.get().status(), "the busy request finished normally");
            assertEquals(1, bed.metric("vmmkit_evictions_total{reason=\"vram\"}"));
        }
    }

    /** Clients on one model, each failing the test on any answer but 200; closing stops them. */
    static final class Clients implements AutoCloseable {
        private final AtomicBoolean stop = new AtomicBoolean();
        private final ConcurrentLinkedQueue<String> failures = new ConcurrentLinkedQueue<>();
        private final AtomicInteger served = new AtomicInteger();
        private final List<Thread> threads = new ArrayList<>();
        private final CountDownLatch serving;
        private volatile CountDownLatch servedAfter = new CountDownLatch(0);

        Clients(EngineTestBed bed, String model, int count) {
            serving = new CountDownLatch(count);
            for (int c = 0; c < count; c++) {
                threads.add(Thread.ofPlatform().start(() -> {
                    boolean counted = false;
                    while (!stop.get()) {
                        CountDownLatch after = servedAfter;
                        EngineTestBed.Answer answer = bed.generate(model, "load");
                        if (answer.status() != 200) failures.add(answer.status() + " " + answer.text());
                        served.incrementAndGet();
                        after.countDown();
                        if (!counted) {
                            serving.countDown();
                            counted = true;
                        }
                    }
                }));
            }
        }

        void awaitServing() throws InterruptedException {
            serving.await();
        }

        /** Waits until every client got an answer to a request it sent after this call. */
        void awaitServedAfterNow() throws InterruptedException {
            CountDownLatch latch = new CountDownLatch(threads.size() * 2);
            servedAfter = latch;
            latch.await();
        }

        @Override
        public void close() {
            stop.set(true);
            for (Thread thread : threads) {
                try {
                    thread.join();
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            }
            assertTrue(failures.isEmpty(), "requests to the other model failed: " + failures);
            assertTrue(served.get() > 0);
        }
    }
}
