package dev.vmmkit.engine;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.file.Files;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * engine_apply_chat_template as the host calls it, in process and in a worker, on the echo
 * engine's test build (echo-chat.so: each message as "[role] content\n", then "[assistant] "),
 * whose answer echoes its prompt: the rendered text comes back as the reply, and its length as
 * the prompt's token count. Also what the host does with an engine that answers "no template",
 * an error, or a length that never fits.
 */
class ChatTemplateAbiTest {

    private static EngineTestBed bed(Path root, boolean workers) throws Exception {
        EngineTestBed bed = new EngineTestBed(root);
        Path echo = Files.createDirectories(bed.engines.resolve("echo").resolve("cpu"));
        Files.copy(EngineTestBed.FIXTURES.resolve("echo-chat.so"), echo.resolve("libecho_engine.so"));
        EngineTestBed.writeManifest(echo, Files.readString(Path.of("examples/echo-engine/manifest-cpu.json")));
        bed.model("tiny.bin", 4096);
        if (workers) bed.workers(EngineHost.Settings.DEFAULT_REQUEST_TIMEOUT);
        return bed.start();
    }

    /** A /v1/chat/completions answer for one user message: the echo's first maxTokens bytes of its prompt, over and over. */
    private static EngineTestBed.Answer chat(EngineTestBed bed, String content, int maxTokens) {
        ObjectNode body = EngineTestBed.JSON.createObjectNode().put("model", "tiny").put("max_tokens", maxTokens);
        body.putArray("messages").addObject().put("role", "user").put("content", content);
        return bed.post("/v1/chat/completions", body.toString());
    }

    /** Asserts that the chat of one user message is served from exactly {@code prompt} (ASCII). */
    private static void servedFrom(EngineTestBed bed, String content, String prompt) {
        EngineTestBed.Answer answer = chat(bed, content, prompt.length());
        assertEquals(prompt, reply(answer));
        assertEquals(prompt.length(), answer.json().get("usage").get("prompt_tokens").asInt(), "the echo counts the prompt's bytes");
    }

    private static String reply(EngineTestBed.Answer answer) {
        assertEquals(200, answer.status(), answer.text());
        return answer.json().get("choices").get(0).get("message").get("content").asText();
    }

    @ParameterizedTest(name = "workers={0}")
    @ValueSource(booleans = {false, true})
    void theEnginesTemplateIsThePromptAndItsAnswersAreHeld(boolean workers, @TempDir Path root) throws Exception {
        try (EngineTestBed bed = bed(root, workers)) {
            EngineTestBed.Answer two = bed.post("/api/chat", "{\"model\":\"tiny\",\"stream\":false,\"options\":{\"num_predict\":32},"
                    + "\"messages\":[{\"role\":\"system\",\"content\":\"x\"},{\"role\":\"user\",\"content\":\"y\"}]}");
            assertEquals(200, two.status(), two.text());
            assertEquals("[system] x\n[user] y\n[assistant] ", two.json().get("message").get("content").asText());
            servedFrom(bed, "hi", "[user] hi\n[assistant] ");

            // 5000 bytes, more than the host's first buffer: the engine asks for room and the second call fills it.
            String story = "z".repeat(5000);
            servedFrom(bed, story, "[user] " + story + "\n[assistant] ");
            servedFrom(bed, "none", "user: none\nassistant:"); // no template: the host's plain form

            EngineTestBed.Answer failed = chat(bed, "fail", 8);
            assertEquals(500, failed.status(), failed.text());
            assertTrue(failed.json().get("error").get("message").asText().contains("engine_apply_chat_template returned error -7"), failed.text());
            EngineTestBed.Answer greedy = chat(bed, "grow", 8);
            assertEquals(500, greedy.status(), greedy.text());
            assertTrue(greedy.json().get("error").get("message").asText().contains("larger buffer twice"), greedy.text());
            JsonNode streamedFailure = EngineTestBed.JSON.readTree(bed.post("/api/chat",
                    "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"fail\"}]}").text());
            assertTrue(streamedFailure.get("error").asText().contains("error -7"), "the error before any line is streamed: " + streamedFailure);

            servedFrom(bed, "still here", "[user] still here\n[assistant] "); // the host and the engine keep serving
        }
    }
}
