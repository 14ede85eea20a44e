package dev.vmmkit.engine;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The OpenAI- and Ollama-compatible endpoints over real HTTP, on the echo example (ABI version 2:
 * it streams the prompt's bytes back, one token each) and its version 1 build, in process and with
 * workers: whole and streamed answers agree, stop strings, split UTF-8, cancellation by a client
 * that goes away, every error shape, probes and the per-model metrics.
 */
class ServingApiTest {
    private static final HttpClient CLIENT = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(10)).build();

    private static EngineTestBed bed(Path root, boolean workers) throws Exception {
        return bed(root, workers, false);
    }

    /** The echo example installed as engine echo (ABI version 2, or its version 1 build), models tiny and old. */
    private static EngineTestBed bed(Path root, boolean workers, boolean versionOne) throws Exception {
        EngineTestBed bed = new EngineTestBed(root);
        Path echo = Files.createDirectories(bed.engines.resolve("echo").resolve("cpu"));
        Files.copy(EngineTestBed.FIXTURES.resolve(versionOne ? "echo-v1.so" : "echo/cpu/libecho_engine.so"), echo.resolve("libecho_engine.so"));
        String manifest = Files.readString(Path.of("examples/echo-engine/manifest-cpu.json"));
        EngineTestBed.writeManifest(echo, versionOne ? manifest.replace("\"abi_version\": \"2\"", "\"abi_version\": \"1\"") : manifest);
        bed.model("tiny.bin", 4096);
        bed.model("old.bin", 4096);
        if (workers) bed.workers(EngineHost.Settings.DEFAULT_REQUEST_TIMEOUT);
        return bed.start();
    }

    private static String base(EngineTestBed bed) {
        return "http://127.0.0.1:" + bed.port();
    }

    /** The data lines of a server-sent event stream, up to [DONE]. */
    private static List<JsonNode> events(String body) throws Exception {
        List<JsonNode> events = new ArrayList<>();
        String[] lines = body.split("\n");
        assertEquals("data: [DONE]", lines[lines.length - 1], body);
        for (String line : lines) {
            if (line.isEmpty() || line.equals("data: [DONE]")) continue;
            assertTrue(line.startsWith("data: "), line);
            events.add(EngineTestBed.JSON.readTree(line.substring(6)));
        }
        return events;
    }

    @ParameterizedTest(name = "workers={0}")
    @ValueSource(booleans = {false, true})
    void openAiCompletionsWholeAndStreamedAgree(boolean workers, @TempDir Path root) throws Exception {
        try (EngineTestBed bed = bed(root, workers)) {
            EngineTestBed.Answer whole = bed.post("/v1/completions", "{\"model\":\"tiny\",\"prompt\":\"hello world\",\"max_tokens\":11,\"seed\":7,\"logprobs\":2}");
            assertEquals(200, whole.status(), whole.text());
            JsonNode choice = whole.json().get("choices").get(0);
            assertEquals("hello world", choice.get("text").asText());
            assertEquals("length", choice.get("finish_reason").asText());
            assertEquals(11, whole.json().get("usage").get("completion_tokens").asInt());
            assertEquals(11, whole.json().get("usage").get("prompt_tokens").asInt());
            assertEquals(11, choice.get("logprobs").get("tokens").size());
            assertEquals(2, choice.get("logprobs").get("top_logprobs").get(0).size());
            assertEquals(11, whole.json().get("vmmkit").get("tokens").size());

            EngineTestBed.Answer streamed = bed.post("/v1/completions", "{\"model\":\"tiny\",\"prompt\":\"hello world\",\"max_tokens\":11,\"seed\":7,\"stream\":true,"
                    + "\"stream_options\":{\"include_usage\":true}}");
            assertEquals(200, streamed.status());
            StringBuilder text = new StringBuilder();
            String finish = null;
            JsonNode usage = null;
            for (JsonNode event : events(streamed.text())) {
                if (event.has("usage")) usage = event.get("usage");
                if (event.get("choices").isEmpty()) continue;
                text.append(event.get("choices").get(0).get("text").asText());
                if (!event.get("choices").get(0).get("finish_reason").isNull()) finish = event.get("choices").get(0).get("finish_reason").asText();
            }
            assertEquals("hello world", text.toString());
            assertEquals("length", finish);
            assertNotNull(usage);
            assertEquals(22, usage.get("total_tokens").asInt());
        }
    }

    @ParameterizedTest(name = "workers={0}")
    @ValueSource(booleans = {false, true})
    void chatStopStringsAndSplitCharacters(boolean workers, @TempDir Path root) throws Exception {
        try (EngineTestBed bed = bed(root, workers)) {
            // the echo engine hands out one byte per token: "é" arrives in two pieces
            EngineTestBed.Answer accented = bed.post("/v1/completions", "{\"model\":\"tiny\",\"prompt\":\"h\u00e9llo\",\"max_tokens\":6}");
            assertEquals("h\u00e9llo", accented.json().get("choices").get(0).get("text").asText());
            EngineTestBed.Answer stopped = bed.post("/v1/completions", "{\"model\":\"tiny\",\"prompt\":\"hello world\",\"max_tokens\":11,\"stop\":[\"o w\",\"zz\"]}");
            assertEquals("hell", stopped.json().get("choices").get(0).get("text").asText());
            assertEquals("stop", stopped.json().get("choices").get(0).get("finish_reason").asText());

            String chat = "{\"model\":\"tiny\",\"max_tokens\":9,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]";
            EngineTestBed.Answer whole = bed.post("/v1/chat/completions", chat + "}");
            assertEquals(200, whole.status(), whole.text());
            assertEquals("chat.completion", whole.json().get("object").asText());
            JsonNode message = whole.json().get("choices").get(0).get("message");
            assertEquals("assistant", message.get("role").asText());
            assertEquals("user: hi\n", message.get("content").asText());
            EngineTestBed.Answer streamed = bed.post("/v1/chat/completions", chat + ",\"stream\":true}");
            StringBuilder text = new StringBuilder();
            for (JsonNode event : events(streamed.text())) {
                JsonNode delta = event.get("choices").get(0).get("delta");
                if (delta.has("content")) text.append(delta.get("content").asText());
            }
            assertEquals(message.get("content").asText(), text.toString());
        }
    }

    @ParameterizedTest(name = "workers={0}")
    @ValueSource(booleans = {false, true})
    void ollamaGenerateAndChatStreamByDefault(boolean workers, @TempDir Path root) throws Exception {
        try (EngineTestBed bed = bed(root, workers)) {
            EngineTestBed.Answer streamed = bed.post("/api/generate", "{\"model\":\"tiny\",\"prompt\":\"abcdef\",\"options\":{\"num_predict\":6}}");
            assertEquals(200, streamed.status());
            String[] lines = streamed.text().split("\n");
            StringBuilder text = new StringBuilder();
            for (int i = 0; i < lines.length; i++) {
                JsonNode line = EngineTestBed.JSON.readTree(lines[i]);
                assertEquals(i == lines.length - 1, line.get("done").asBoolean(), lines[i]);
                text.append(line.get("response").asText());
            }
            JsonNode last = EngineTestBed.JSON.readTree(lines[lines.length - 1]);
            assertEquals("abcdef", text.toString());
            assertEquals("length", last.get("done_reason").asText());
            assertEquals(6, last.get("eval_count").asInt());
            assertEquals("echo", last.get("engine").asText());
            assertEquals(6, last.get("tokens").size());

            EngineTestBed.Answer whole = bed.post("/api/chat", "{\"model\":\"tiny\",\"stream\":false,\"options\":{\"num_predict\":8},"
                    + "\"messages\":[{\"role\":\"system\",\"content\":\"x\"},{\"role\":\"user\",\"content\":\"y\"}]}");
            assertEquals(200, whole.status(), whole.text());
            assertEquals("system: ", whole.json().get("message").get("content").asText());
            assertTrue(whole.json().get("done").asBoolean());

            JsonNode tags = bed.get("/api/tags").json();
            List<String> names = new ArrayList<>();
            tags.get("models").forEach(m -> names.add(m.get("name").asText()));
            assertEquals(List.of("old", "tiny"), names);
            JsonNode models = bed.get("/v1/models").json();
            assertEquals("list", models.get("object").asText());
            assertEquals(2, models.get("data").size());
        }
    }

    @ParameterizedTest(name = "workers={0}")
    @ValueSource(booleans = {false, true})
    void versionOnePluginsStillServeThroughApiGenerate(boolean workers, @TempDir Path root) throws Exception {
        try (EngineTestBed bed = bed(root, workers, true)) {
            assertEquals(1, bed.engine("echo").get("abi_version").asInt());
            EngineTestBed.Answer answer = bed.generate("old", "hello");
            assertEquals(200, answer.status(), answer.text());
            assertEquals("echo", answer.json().get("engine").asText());
            JsonNode tokens = answer.json().get("tokens");
            assertEquals(5, tokens.size());
            for (JsonNode token : tokens) assertEquals(3, token.get("logprobs").size());
            assertEquals("", answer.json().get("response").asText());
            EngineTestBed.Answer streamed = bed.post("/api/generate", "{\"model\":\"old\",\"prompt\":\"hello\"}");
            assertEquals(200, streamed.status());
            String[] lines = streamed.text().split("\n");
            assertEquals(tokens, EngineTestBed.JSON.readTree(lines[lines.length - 1]).get("tokens"));
        }
    }

    @ParameterizedTest(name = "workers={0}")
    @ValueSource(booleans = {false, true})
    void aClientThatGoesAwayCancelsItsGeneration(boolean workers, @TempDir Path root) throws Exception {
        try (EngineTestBed bed = bed(root, workers)) {
            // a billion tokens: the stream can only end because the client went away
            HttpRequest endless = HttpRequest.newBuilder(URI.create(base(bed) + "/v1/completions"))
                    .POST(HttpRequest.BodyPublishers.ofString("{\"model\":\"tiny\",\"prompt\":\"abc\",\"max_tokens\":1000000000,\"stream\":true}")).build();
            HttpResponse<InputStream> response = CLIENT.send(endless, HttpResponse.BodyHandlers.ofInputStream());
            assertEquals(200, response.statusCode());
            try (InputStream body = response.body()) {
                BufferedReader reader = new BufferedReader(new InputStreamReader(body, StandardCharsets.UTF_8));
                int chunks = 0;
                while (chunks < 2) {
                    String line = reader.readLine();
                    if (line != null && line.startsWith("data: ")) chunks++;
                }
            }
            // the model is not concurrent: this request waits for the engine, so it is served only once the engine stopped
            EngineTestBed.Answer next = bed.post("/v1/completions", "{\"model\":\"tiny\",\"prompt\":\"next\",\"max_tokens\":4}");
            assertEquals(200, next.status(), next.text());
            assertEquals("next", next.json().get("choices").get(0).get("text").asText());
            assertEquals(1, bed.metric("vmmkit_request_finish_total{model=\"tiny\",finish_reason=\"cancelled\"}"));
            long generated = bed.metric("vmmkit_generation_tokens_total{model=\"tiny\"}");
            assertTrue(generated > 2 && generated < 1_000_000_000L, "tokens generated " + generated);
            assertEquals(0, bed.loadedModel("tiny").get("in_flight").asInt());
        }
    }

    @ParameterizedTest(name = "workers={0}")
    @ValueSource(booleans = {false, true})
    void badInputGetsEachDialectsErrorShapeAndTheServerGoesOn(boolean workers, @TempDir Path root) throws Exception {
        try (EngineTestBed bed = bed(root, workers)) {
            String huge = "x".repeat(10 << 20);
            String[][] openAi = {
                    {"{\"model\":\"nope\",\"prompt\":\"x\"}", "404", "unknown model"},
                    {"{\"model\":\"tiny\",", "400", "not valid JSON"},
                    {"{\"model\":\"tiny\",\"prompt\":\"x\",\"max_tokens\":-1}", "400", "max_tokens"},
                    {"{\"model\":\"tiny\",\"prompt\":\"" + huge + "\"}", "413", "larger than the limit"},
            };
            for (String[] bad : openAi) {
                EngineTestBed.Answer answer = bed.post("/v1/completions", bad[0]);
                assertEquals(Integer.parseInt(bad[1]), answer.status(), answer.text());
                JsonNode error = answer.json().get("error");
                assertTrue(error.isObject() && error.get("message").asText().contains(bad[2]), answer.text());
                assertTrue(error.has("type"), answer.text());
            }
            EngineTestBed.Answer role = bed.post("/v1/chat/completions", "{\"model\":\"tiny\",\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}");
            assertEquals(400, role.status());
            assertTrue(role.json().get("error").get("message").asText().contains("role"), role.text());
            String[][] ollama = {
                    {"/api/generate", "{\"model\":\"nope\",\"prompt\":\"x\"}", "404"},
                    {"/api/generate", "{oops", "400"},
                    {"/api/generate", "{\"model\":\"tiny\",\"prompt\":\"x\",\"options\":{\"num_predict\":-5}}", "400"},
                    {"/api/chat", "{\"model\":\"tiny\",\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", "400"},
                    {"/api/generate", "{\"model\":\"tiny\",\"prompt\":\"" + huge + "\"}", "413"},
            };
            for (String[] bad : ollama) {
                EngineTestBed.Answer answer = bed.post(bad[0], bad[1]);
                assertEquals(Integer.parseInt(bad[2]), answer.status(), answer.text());
                assertTrue(answer.json().get("error").isTextual(), answer.text());
            }
            EngineTestBed.Answer fine = bed.post("/v1/completions", "{\"model\":\"tiny\",\"prompt\":\"ok\",\"max_tokens\":2}");
            assertEquals("ok", fine.json().get("choices").get(0).get("text").asText());
        }
    }

    @ParameterizedTest(name = "workers={0}")
    @ValueSource(booleans = {false})
    void probesAndPerModelMetrics(boolean workers, @TempDir Path root) throws Exception {
        try (EngineTestBed bed = bed(root, workers)) {
            assertEquals(200, bed.get("/health").status());
            assertEquals("ready", bed.get("/ready").json().get("status").asText());
            bed.post("/v1/completions", "{\"model\":\"tiny\",\"prompt\":\"abcd\",\"max_tokens\":4}");
            bed.post("/api/generate", "{\"model\":\"tiny\",\"prompt\":\"ab\",\"stream\":false,\"options\":{\"num_predict\":3}}");
            String metrics = bed.get("/metrics").text();
            assertEquals(2, bed.metric("vmmkit_request_duration_seconds_count{model=\"tiny\"}"));
            assertEquals(2, bed.metric("vmmkit_time_to_first_token_seconds_count{model=\"tiny\"}"));
            assertEquals(2, bed.metric("vmmkit_time_per_output_token_seconds_count{model=\"tiny\"}"));
            assertEquals(7, bed.metric("vmmkit_generation_tokens_total{model=\"tiny\"}"));
            assertEquals(6, bed.metric("vmmkit_prompt_tokens_total{model=\"tiny\"}"));
            assertEquals(2, bed.metric("vmmkit_request_finish_total{model=\"tiny\",finish_reason=\"length\"}"));
            assertTrue(metrics.contains("# TYPE vmmkit_time_to_first_token_seconds histogram"), metrics);
            assertTrue(metrics.contains("vmmkit_request_duration_seconds_bucket{model=\"tiny\",le=\"+Inf\"} 2"), metrics);
            assertFalse(metrics.contains("NaN"), metrics);
        }
    }
}
