package dev.vmmkit.engine;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The HTTP API end to end: real plugins, real HTTP, the host emulation underneath. */
class EngineHttpApiTest {

    @Test
    void generatesThroughAPluginAndListsEnginesAndModels(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = new EngineTestBed(root)) {
            bed.install("fixture", "1.0.0", "fixture-v1.so", "\"fx\"", "");
            bed.model("alpha.fx", 3 << 20);
            bed.start();
            assertEquals("available", bed.engine("fixture").get("status").asText());

            EngineTestBed.Answer answer = bed.generate("alpha", "hello");
            assertEquals(200, answer.status(), answer.text());
            assertEquals("alpha", answer.json().get("model").asText());
            assertEquals("fixture", answer.json().get("engine").asText());
            assertEquals("1.0.0", answer.json().get("engine_version").asText());
            JsonNode tokens = answer.json().get("tokens");
            assertEquals(2, tokens.size());
            assertEquals(1, tokens.get(0).get("id").asInt(), "first call of this instance");
            assertEquals(1, tokens.get(1).get("id").asInt(), "major version");
            assertEquals(-1.5, tokens.get(0).get("logprobs").get(1).asDouble(), 1e-6);

            assertEquals("loaded", bed.engine("fixture").get("status").asText());
            JsonNode model = bed.loadedModel("alpha");
            assertEquals("fixture", model.get("engine").asText());
            assertEquals("1.0.0", model.get("engine_version").asText());
            assertEquals((3 << 20) + 4096, model.get("device_bytes").asLong(), "weights + scratch, through alloc_device");
            assertEquals(0, model.get("in_flight").asInt());
            assertNotNull(model.get("last_used").asText());
            assertEquals(2, bed.generate("alpha", "again").json().get("tokens").get(0).get("id").asInt());
        }
    }

    @Test
    void eachModelHasItsOwnInstanceAndGlobals(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = new EngineTestBed(root)) {
            bed.install("fixture", "1.0.0", "fixture-v1.so", "\"fx\"", "");
            bed.model("one.fx", 4096);
            bed.model("two.fx", 4096);
            bed.start();
            bed.generate("one", "x");
            bed.generate("one", "x");
            assertEquals(3, bed.generate("one", "x").json().get("tokens").get(0).get("id").asInt());
            assertEquals(1, bed.generate("two", "x").json().get("tokens").get(0).get("id").asInt(),
                    "a second model of the same engine starts from fresh globals");
        }
    }

    @Test
    void unloadFreesWhatTheEngineForgot(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = new EngineTestBed(root)) {
            bed.install("fixture", "1.0.0", "fixture-v1.so", "\"fx\"", "");
            bed.model("alpha.fx", 6 << 20);
            bed.start();
            long before = bed.metric("vmmkit_device_used_bytes");
            assertEquals(200, bed.generate("alpha", "x").status());
            assertTrue(bed.metric("vmmkit_device_used_bytes") >= before + (6 << 20));
            assertEquals(6L << 20, bed.metric("vmmkit_model_device_bytes{model=\"alpha\",engine=\"fixture\",version=\"1.0.0\"}") - 4096);

            EngineTestBed.Answer unloaded = bed.delete("/api/models/alpha");
            assertEquals(200, unloaded.status(), unloaded.text());
            assertNull(bed.loadedModel("alpha"));
            // The fixture's engine_shutdown frees only its scratch buffer; the host frees the weights.
            assertEquals(before, bed.metric("vmmkit_device_used_bytes"));
            assertEquals(0, bed.metric("vmmkit_models_loaded"));
            assertEquals(404, bed.delete("/api/models/alpha").status());
            assertEquals("available", bed.engine("fixture").get("status").asText());
        }
    }

    @Test
    void badRequestsGetClearErrors(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = new EngineTestBed(root)) {
            bed.install("fixture", "1.0.0", "fixture-v1.so", "\"fx\"", "");
            bed.model("alpha.fx", 4096);
            bed.model("orphan.xyz", 4096);
            bed.start();
            assertError(bed.post("/api/generate", "not json"), 400, "not valid JSON");
            assertError(bed.post("/api/generate", ""), 400, "empty");
            assertError(bed.post("/api/generate", "[1,2]"), 400, "JSON object");
            assertError(bed.post("/api/generate", "{\"model\":\"alpha\"}"), 400, "\"prompt\"");
            assertError(bed.post("/api/generate", "{\"model\":7,\"prompt\":\"x\"}"), 400, "\"model\"");
            assertError(bed.post("/api/generate", "{\"model\":\"alpha\",\"prompt\":[]}"), 400, "\"prompt\"");
            assertError(bed.generate("../models/alpha", "x"), 400, "not valid");
            assertError(bed.generate("missing", "x"), 404, "unknown model 'missing'");
            assertError(bed.generate("orphan", "x"), 404, "no available engine");
            assertError(bed.get("/api/generate"), 405, "POST");
            assertError(bed.post("/api/models", "{}"), 405, "GET");
            assertError(bed.get("/api/nothing"), 404, "no such endpoint");
            assertError(bed.post("/api/engines/nobody/reload", ""), 404, "unknown engine 'nobody'");
            assertEquals(200, bed.generate("alpha", "still fine").status());
            assertEquals(1, bed.metric("vmmkit_requests_total{status=\"200\"}"));
            assertEquals(7, bed.metric("vmmkit_requests_total{status=\"400\"}"));
            assertEquals(4, bed.metric("vmmkit_requests_total{status=\"404\"}"));
            assertEquals(2, bed.metric("vmmkit_requests_total{status=\"405\"}"));
        }
    }

    @Test
    void engineErrorsAre500AndTheServerKeepsServing(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = new EngineTestBed(root)) {
            bed.install("fixture", "1.0.0", "fixture-v1.so", "\"fx\"", "");
            bed.install("failload", "1.0.0", "fixture-failload.so", "\"bad\"", "");
            bed.model("alpha.fx", 4096);
            bed.model("broken.bad", 4096);
            bed.start();
            assertError(bed.generate("alpha", "fail"), 500, "engine_generate returned error -3");
            assertError(bed.generate("broken", "x"), 500, "engine_load_model returned error -7");
            assertError(bed.generate("broken", "x"), 500, "engine_load_model returned error -7");
            assertNull(bed.loadedModel("broken"));
            assertEquals(200, bed.generate("alpha", "x").status());
            assertEquals(0, bed.metric("vmmkit_model_device_bytes{model=\"broken\",engine=\"failload\",version=\"1.0.0\"}") + 1,
                    "a failed load holds nothing");
        }
    }

    @Test
    void refusedPluginsAreListedWithTheirReasonAndNeverStopTheHost(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = new EngineTestBed(root)) {
            bed.install("fixture", "1.0.0", "fixture-v1.so", "\"fx\"", "");
            bed.install("badabi", "1.0.0", "fixture-abi3.so", "\"b1\"", "");
            bed.install("nogenerate", "1.0.0", "fixture-nogenerate.so", "\"b2\"", "");
            Path wrongVersion = bed.install("fixture2", "1.0.0", "fixture-v2.so", "\"b3\"", "");
            EngineTestBed.writeManifest(wrongVersion, Files.readString(wrongVersion.resolve("manifest.json")).replace("fixture2", "fixture"));
            Files.move(wrongVersion.getParent(), bed.engines.resolve("fixture-moved"));
            Path notJson = Files.createDirectories(bed.engines.resolve("notjson").resolve("cpu"));
            EngineTestBed.writeManifest(notJson, "{\"id\": ");
            Path noBinary = Files.createDirectories(bed.engines.resolve("nobinary").resolve("cpu"));
            EngineTestBed.writeManifest(noBinary, "{\"id\":\"nobinary\",\"version\":\"1\",\"abi_version\":1,\"gpu_backend\":\"cpu\",\"formats\":[\"q\"],\"binary\":\"gone.so\"}");
            Path noFormats = Files.createDirectories(bed.engines.resolve("noformats").resolve("cpu"));
            EngineTestBed.writeManifest(noFormats, "{\"id\":\"noformats\",\"version\":\"1\",\"abi_version\":1,\"gpu_backend\":\"cpu\",\"binary\":\"x.so\"}");
            Path mismatch = bed.install("versions", "9.9.9", "fixture-v1.so", "\"b4\"", "");
            EngineTestBed.writeManifest(mismatch, Files.readString(mismatch.resolve("manifest.json")).replace("\"versions\"", "\"fixture\""));
            Files.move(mismatch.getParent(), bed.engines.resolve("fixture-v999"));
            bed.model("alpha.fx", 4096);
            bed.model("beta.b1", 4096);
            bed.start();

            assertRejected(bed, "badabi", "binary reports abi_version 3, the host implements abi_version 1 and 2");
            assertRejected(bed, "nogenerate", "required symbol engine_generate is missing");
            assertRejected(bed, "notjson", "not valid JSON");
            assertRejected(bed, "nobinary", "gone.so does not exist");
            assertRejected(bed, "noformats", "\"formats\"");
            assertEquals(8, bed.get("/api/engines").json().size());
            for (JsonNode engine : bed.get("/api/engines").json()) {
                if (engine.get("id").asText().equals("fixture") && engine.get("status").asText().equals("rejected")) {
                    assertTrue(engine.get("reason").asText().contains("does not match its directory"), engine.toString());
                }
            }
            assertError(bed.generate("beta", "x"), 404, "no available engine");
            assertEquals(200, bed.generate("alpha", "x").status());
        }
    }

    @Test
    void manifestAndBinaryThatDisagreeAreRefusedNamingBothVersions(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = new EngineTestBed(root)) {
            bed.install("fixture", "3.0.0", "fixture-v1.so", "\"fx\"", "");
            bed.start();
            assertRejected(bed, "fixture", "manifest says version 3.0.0, binary reports version 1.0.0");
        }
    }

    @Test
    void callsAreSerialisedPerInstanceUnlessTheManifestSaysConcurrent(@TempDir Path root) throws Exception {
        Path hooks = root.resolve("hooks");
        try (EngineTestBed bed = new EngineTestBed(root);
             EngineHooks serial = EngineHooks.open(hooks, "serial");
             EngineHooks parallel = EngineHooks.open(hooks, "parallel")) {
            String options = "\"options\":{\"delay_ms\":0,\"hook_dir\":\"" + hooks + "\"}";
            bed.install("slow", "1.0.0", "fixture-slow.so", "\"sl\"", "," + options);
            bed.install("fixture", "1.0.0", "fixture-v1.so", "\"fx\"", "," + options + ",\"concurrent\":true");
            bed.model("serial.sl", 4096);
            bed.model("parallel.fx", 4096);
            bed.start();
            try (ExecutorService clients = Executors.newFixedThreadPool(4)) {
                // A concurrent engine: all four calls are inside engine_generate before any returns.
                List<Future<EngineTestBed.Answer>> calls = new ArrayList<>();
                for (int i = 0; i < 4; i++) calls.add(clients.submit(() -> bed.generate("parallel", "hold:parallel")));
                for (int i = 0; i < 4; i++) parallel.awaitEntered();
                for (int i = 0; i < 4; i++) parallel.release();
                for (Future<EngineTestBed.Answer> call : calls) assertEquals(4, mostInside(call.get()), "side by side");

                // One at a time: all four wait in the host while one is inside the engine.
                calls.clear();
                for (int i = 0; i < 4; i++) calls.add(clients.submit(() -> bed.generate("serial", "hold:serial")));
                serial.awaitEntered();
                ServedModel model = bed.host().registry().models().stream()
                        .filter(m -> m.name().equals("serial")).findFirst().orElseThrow();
                while (model.instance().gate().inFlight() < 4) Thread.onSpinWait();
                for (int i = 0; i < 4; i++) {
                    serial.release();
                    if (i < 3) serial.awaitEntered();
                }
                for (Future<EngineTestBed.Answer> call : calls) assertEquals(1, mostInside(call.get()), "one call at a time");
            }
        }
    }

    /** The fixture's third token for a held call: the most calls inside engine_generate at once. */
    private static int mostInside(EngineTestBed.Answer answer) {
        assertEquals(200, answer.status(), answer.text());
        return answer.json().get("tokens").get(2).get("id").asInt();
    }

    static void assertRejected(EngineTestBed bed, String id, String reason) {
        JsonNode engine = bed.engine(id);
        assertNotNull(engine, id + " is listed");
        assertEquals("rejected", engine.get("status").asText(), engine.toString());
        assertTrue(engine.get("reason").asText().contains(reason), engine + " should say " + reason);
    }

    static void assertError(EngineTestBed.Answer answer, int status, String text) {
        assertEquals(status, answer.status(), answer.text());
        assertNotNull(answer.error(), answer.text());
        assertTrue(answer.error().contains(text), "'" + answer.error() + "' should contain '" + text + "'");
    }
}
