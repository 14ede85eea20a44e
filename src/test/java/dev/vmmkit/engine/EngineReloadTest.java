package dev.vmmkit.engine;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import static dev.vmmkit.engine.EngineHttpApiTest.assertError;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/** Hot reload by shadow loading, through real HTTP. */
class EngineReloadTest {
    private static final int CLIENTS = 8;

    @Test
    void reloadUnderEightClientsLosesNoRequest(@TempDir Path root) throws Exception {
        reloadUnderEightClients(root, false);
    }

    @Test
    void reloadUnderEightClientsLosesNoRequestWithWorkers(@TempDir Path root) throws Exception {
        reloadUnderEightClients(root, true);
    }

    /**
     * Eight clients on two models through two reloads (v1 to v2, the binary rewritten in place
     * under the running instances, then back to v1). Each answer is recorded with the phase its
     * request was sent in: 0 before the first reload answered (either version), 1 between it and
     * the second reload (only 2.0.0, when it was answered before the second reload began; either
     * after: a client may be held up between reading the phase and sending), 2 during the second
     * (either), 3 after it (only 1.0.0).
     * Latches, not pauses, make every client send requests in phases 0, 1 and 3.
     */
    private static void reloadUnderEightClients(Path root, boolean workers) throws Exception {
        try (HttpServerTrace serverTrace = new HttpServerTrace(); EngineTestBed bed = new EngineTestBed(root)) {
            Path plugin = bed.install("fixture", "1.0.0", "fixture-v1.so", "\"fx\"", "");
            bed.model("a.fx", 1 << 20);
            bed.model("b.fx", 1 << 20);
            if (workers) bed.workers(java.time.Duration.ofSeconds(300));
            bed.start();
            AtomicBoolean stop = new AtomicBoolean();
            AtomicInteger phase = new AtomicInteger();
            ConcurrentLinkedQueue<String> failures = new ConcurrentLinkedQueue<>();
            List<List<String>> seen = new ArrayList<>(); // "PHASE VERSION" per answer, per client
            CountDownLatch[] answeredIn = {new CountDownLatch(CLIENTS), new CountDownLatch(CLIENTS),
                    new CountDownLatch(0), new CountDownLatch(CLIENTS)};
            CountDownLatch[] overwritten = {new CountDownLatch(1), new CountDownLatch(CLIENTS)};
            List<Thread> clients = new ArrayList<>();
            for (int c = 0; c < CLIENTS; c++) {
                List<String> answers = new ArrayList<>();
                seen.add(answers);
                String model = c % 2 == 0 ? "a" : "b";
                clients.add(Thread.ofPlatform().start(() -> {
                    int n = 0;
                    boolean[] counted = new boolean[4];
                    boolean countedOverwrite = false;
                    try {
                        while (!stop.get()) {
                            int sentIn = phase.get();
                            boolean afterOverwrite = overwritten[0].getCount() == 0;
                            EngineTestBed.Answer answer = bed.generate(model, "p" + n++);
                            // A phase-1 request answered once phase 2 began may have met the second reload.
                            int label = sentIn == 1 && phase.get() > 1 ? 2 : sentIn;
                            if (answer.status() != 200) failures.add(answer.status() + " " + answer.text());
                            else answers.add(label + " " + answer.json().get("engine_version").asText());
                            if (!counted[sentIn] && n >= 3) {
                                counted[sentIn] = true;
                                answeredIn[sentIn].countDown();
                            }
                            if (afterOverwrite && !countedOverwrite) {
                                countedOverwrite = true;
                                overwritten[1].countDown();
                            }
                        }
                    } catch (RuntimeException e) {
                        // A client that cannot go on fails the test instead of leaving the others
                        // (and the latches the test waits on) to wait for it.
                        failures.add("request " + n + " on " + model + ": " + e);
                        stop.set(true);
                        for (CountDownLatch latch : answeredIn) while (latch.getCount() > 0) latch.countDown();
                        while (overwritten[1].getCount() > 0) overwritten[1].countDown();
                    }
                }));
            }
            answeredIn[0].await();
            EngineTestBed.overwriteInPlace(plugin.resolve("engine.so"), EngineTestBed.FIXTURES.resolve("fixture-v2.so"));
            setVersion(plugin, "2.0.0");
            overwritten[0].countDown();
            overwritten[1].await(); // every client was answered by the old instances after the file changed under them
            EngineTestBed.Answer first = bed.post("/api/engines/fixture/reload", "");
            assertEquals(200, first.status(), first.text());
            assertEquals("2.0.0", first.json().get("reloaded").get(0).get("version").asText());
            assertEquals(2, first.json().get("reloaded").get(0).get("models").size());
            phase.set(1);
            answeredIn[1].await();
            EngineTestBed.overwriteInPlace(plugin.resolve("engine.so"), EngineTestBed.FIXTURES.resolve("fixture-v1.so"));
            setVersion(plugin, "1.0.0");
            phase.set(2);
            assertEquals(200, bed.post("/api/engines/fixture/reload", "").status());
            phase.set(3);
            answeredIn[3].await();
            stop.set(true);
            for (Thread client : clients) client.join();

            assertTrue(failures.isEmpty(), "failed requests: " + failures + "; the HTTP server's log of closed connections: "
                    + serverTrace.lines());
            List<String> expected = Arrays.asList(null, "2.0.0", null, "1.0.0"); // null: either
            for (List<String> answers : seen) {
                int[] perPhase = new int[4];
                for (String answer : answers) {
                    int sentIn = answer.charAt(0) - '0';
                    String version = answer.substring(2);
                    perPhase[sentIn]++;
                    String wanted = expected.get(sentIn);
                    if (wanted != null) {
                        assertEquals(wanted, version, "answer " + perPhase[sentIn] + " to a request sent in phase " + sentIn);
                    } else {
                        assertTrue(version.equals("1.0.0") || version.equals("2.0.0"), version);
                    }
                }
                assertTrue(perPhase[1] > 0 && perPhase[3] > 0, "the client saw each new version: " + Arrays.toString(perPhase));
            }
            assertEquals(2, bed.metric("vmmkit_reloads_total{result=\"ok\"}"));
            assertEquals(2, bed.get("/api/models").json().size());
        }
    }

    @Test
    void aFailedReloadKeepsTheOldVersionServingAndSaysWhy(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = new EngineTestBed(root)) {
            Path plugin = bed.install("fixture", "1.0.0", "fixture-v1.so", "\"fx\"", "");
            bed.model("a.fx", 4096);
            bed.start();
            assertEquals(1, bed.generate("a", "x").json().get("tokens").get(0).get("id").asInt());

            EngineTestBed.overwriteInPlace(plugin.resolve("engine.so"), EngineTestBed.FIXTURES.resolve("fixture-abi3.so"));
            // The installed file is now another binary; the running private copy must not notice.
            assertEquals(2, bed.generate("a", "x").json().get("tokens").get(0).get("id").asInt());
            EngineTestBed.Answer refused = bed.post("/api/engines/fixture/reload", "");
            assertError(refused, 500, "abi_version 3");
            assertTrue(refused.error().contains("version 1.0.0 keeps serving"), refused.error());

            EngineTestBed.Answer still = bed.generate("a", "x");
            assertEquals("1.0.0", still.json().get("engine_version").asText());
            assertEquals(3, still.json().get("tokens").get(0).get("id").asInt(), "the same instance, not a new one");
            assertEquals("loaded", bed.engine("fixture").get("status").asText());
            assertTrue(bed.engine("fixture").get("last_reload_error").asText().contains("abi_version 3"));
            assertEquals(1, bed.metric("vmmkit_reloads_total{result=\"failed\"}"));

            // Manifest and binary disagreeing is refused too, naming both versions.
            EngineTestBed.overwriteInPlace(plugin.resolve("engine.so"), EngineTestBed.FIXTURES.resolve("fixture-v2.so"));
            assertError(bed.post("/api/engines/fixture/reload", ""), 500,
                    "manifest says version 1.0.0, binary reports version 2.0.0");
            assertEquals("1.0.0", bed.generate("a", "x").json().get("engine_version").asText());

            setVersion(plugin, "2.0.0");
            assertEquals(200, bed.post("/api/engines/fixture/reload", "").status());
            EngineTestBed.Answer after = bed.generate("a", "x");
            assertEquals("2.0.0", after.json().get("engine_version").asText());
            assertEquals(1, after.json().get("tokens").get(0).get("id").asInt(), "a fresh instance");
            assertNull(bed.engine("fixture").get("last_reload_error"));
        }
    }

    @Test
    void aChangedBinaryIsReloadedOnItsOwn(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = new EngineTestBed(root)) {
            Path plugin = bed.install("fixture", "1.0.0", "fixture-v1.so", "\"fx\"", "");
            bed.model("a.fx", 4096);
            bed.start(256L << 20, 0.9, 50, true, null);
            assertEquals("1.0.0", bed.generate("a", "x").json().get("engine_version").asText());
            EngineTestBed.overwriteInPlace(plugin.resolve("engine.so"), EngineTestBed.FIXTURES.resolve("fixture-v2.so"));
            setVersion(plugin, "2.0.0");
            awaitVersion(bed, "a", "2.0.0");

            // A plugin installed while the host runs is discovered too.
            Path late = bed.install("late", "1.0.0", "fixture-v1.so", "\"lt\"", "");
            EngineTestBed.writeManifest(late, Files.readString(late.resolve("manifest.json")).replace("\"late\"", "\"fixture\""));
            Files.move(late.getParent(), bed.engines.resolve("fixture-late-unused"));
            bed.model("b.fx", 4096);
            assertEquals("2.0.0", bed.generate("b", "x").json().get("engine_version").asText());
        }
    }

    @Test
    void aRejectedPluginFixedOnDiskBecomesAvailableOnReload(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = new EngineTestBed(root)) {
            Path plugin = bed.install("fixture", "1.0.0", "fixture-abi3.so", "\"fx\"", "");
            bed.model("a.fx", 4096);
            bed.start();
            assertEquals("rejected", bed.engine("fixture").get("status").asText());
            assertEquals(404, bed.generate("a", "x").status());
            EngineTestBed.overwriteInPlace(plugin.resolve("engine.so"), EngineTestBed.FIXTURES.resolve("fixture-v1.so"));
            assertEquals(200, bed.post("/api/engines/fixture/reload", "").status());
            assertEquals("available", bed.engine("fixture").get("status").asText());
            assertNull(bed.engine("fixture").get("reason"));
            assertEquals(200, bed.generate("a", "x").status());
        }
    }

    private static void setVersion(Path plugin, String version) throws Exception {
        String manifest = Files.readString(plugin.resolve("manifest.json"));
        EngineTestBed.writeManifest(plugin, manifest.replaceAll("\"version\":\"[^\"]*\"", "\"version\":\"" + version + "\""));
    }

    private static void awaitVersion(EngineTestBed bed, String model, String version) throws InterruptedException {
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (System.nanoTime() < deadline) {
            EngineTestBed.Answer answer = bed.generate(model, "x");
            assertEquals(200, answer.status(), answer.text());
            assertNotNull(answer.json());
            if (answer.json().get("engine_version").asText().equals(version)) return;
            Thread.sleep(20);
        }
        fail("model " + model + " never reached version " + version);
    }
}
