package dev.vmmkit.engine;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Chats served through the model's own chat template: the llama engine applies the template
 * scripts/tiny-gguf.sh writes into the tiny GGUF (ChatML, through llama.cpp's
 * llama_chat_apply_template), in process and in a worker; a model without a template, or with one
 * llama.cpp does not know, gets the host's plain form. Skipped, saying why, as LlamaEngineTest.
 */
class LlamaChatTemplateTest {
    /**
     * ChatML worked out by hand from its definition (scripts/tiny_gguf.py's CHATML): each message
     * is {@code <|im_start|>ROLE\nCONTENT<|im_end|>\n}, and the generation prompt
     * {@code <|im_start|>assistant\n} follows the last.
     */
    private static final String CHATML = "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n";
    /** The same chat in the host's plain form. */
    private static final String PLAIN = "system: be brief\nuser: hi\nassistant:";
    private static final List<ChatMessage> CHAT = List.of(new ChatMessage("system", "be brief"), new ChatMessage("user", "hi"));
    private static final String MESSAGES = "[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"user\",\"content\":\"hi\"}]";
    private static Path chatml;
    private static Path plain;
    private static Path unknown;

    @BeforeAll
    static void models(@TempDir Path dir) throws Exception {
        assumeTrue(Files.isRegularFile(LlamaEngineTest.PLUGIN.resolve("libllama_engine.so")),
                "llama.cpp was not fetched, so the llama engine was not built (scripts/install-test-deps.sh, run by "
                        + "./vmmkit test, runs scripts/fetch-llama-cpp.sh: it needs npm and the npm registry)");
        chatml = LlamaEngineTest.write(dir.resolve("chatml.gguf"), "--chat-template", "chatml");
        plain = LlamaEngineTest.write(dir.resolve("plain.gguf"));
        unknown = LlamaEngineTest.write(dir.resolve("unknown.gguf"), "--chat-template", "{% for m in messages %}{{ m.content }}{% endfor %}");
    }

    private static EngineTestBed bed(Path root, boolean workers) throws Exception {
        EngineTestBed bed = new EngineTestBed(root);
        Path dir = Files.createDirectories(bed.engines.resolve("llama/cpu"));
        Files.copy(LlamaEngineTest.PLUGIN.resolve("libllama_engine.so"), dir.resolve("libllama_engine.so"));
        EngineTestBed.writeManifest(dir, "{\"id\":\"llama\",\"version\":\"3.22.1\",\"abi_version\":\"2\",\"gpu_backend\":\"cpu\","
                + "\"architectures\":[\"llama\"],\"formats\":[\"gguf\"],\"binary\":\"libllama_engine.so\",\"options\":{\"threads\":1}}");
        Files.copy(chatml, bed.models.resolve("chatml.gguf"));
        Files.copy(plain, bed.models.resolve("plain.gguf"));
        Files.copy(unknown, bed.models.resolve("unknown.gguf"));
        if (workers) bed.workers(EngineHost.Settings.DEFAULT_REQUEST_TIMEOUT);
        bed.start();
        return bed;
    }

    private static Optional<String> rendered(EngineTestBed bed, String model, List<ChatMessage> chat) {
        try (ModelRegistry.Lease lease = bed.host().registry().acquire(model)) {
            return lease.instance().chatTemplate(chat);
        }
    }

    private static JsonNode completion(EngineTestBed bed, String model, String prompt) {
        ObjectNode body = EngineTestBed.JSON.createObjectNode().put("model", model).put("prompt", prompt).put("max_tokens", 8);
        EngineTestBed.Answer answer = bed.post("/v1/completions", body.toString());
        assertEquals(200, answer.status(), answer.text());
        return answer.json();
    }

    private static JsonNode chat(EngineTestBed bed, String model) {
        EngineTestBed.Answer answer = bed.post("/v1/chat/completions", "{\"model\":\"" + model + "\",\"max_tokens\":8,\"messages\":" + MESSAGES + "}");
        assertEquals(200, answer.status(), answer.text());
        return answer.json();
    }

    private static int promptTokens(JsonNode openAi) {
        return openAi.get("usage").get("prompt_tokens").asInt();
    }

    @ParameterizedTest(name = "workers={0}")
    @ValueSource(booleans = {false, true})
    void theModelsTemplateRendersTheChatAndTheEngineReadsItsSpecialTokens(boolean workers, @TempDir Path root) throws Exception {
        try (EngineTestBed bed = bed(root, workers)) {
            assertEquals(Optional.of(CHATML), rendered(bed, "chatml", CHAT), "llama.cpp's ChatML, as its definition says");
            // Longer than the host's first buffer (ChatTemplateCall.FIRST_BUFFER): the engine asks for room, a second call fills it.
            String story = "ab ".repeat(3000);
            assertEquals(Optional.of("<|im_start|>user\n" + story + "<|im_end|>\n<|im_start|>assistant\n"),
                    rendered(bed, "chatml", List.of(new ChatMessage("user", story))));

            // Served from exactly that text: the same prompt count, tokens and log-probabilities as the text itself.
            JsonNode chat = chat(bed, "chatml");
            JsonNode same = completion(bed, "chatml", CHATML);
            assertEquals(promptTokens(same), promptTokens(chat));
            assertEquals(same.get("vmmkit").get("tokens"), chat.get("vmmkit").get("tokens"));
            assertEquals(same.get("choices").get(0).get("text").asText(), chat.get("choices").get(0).get("message").get("content").asText());
            EngineTestBed.Answer ollama = bed.post("/api/chat", "{\"model\":\"chatml\",\"stream\":false,\"options\":{\"num_predict\":8},\"messages\":" + MESSAGES + "}");
            assertEquals(200, ollama.status(), ollama.text());
            assertEquals(promptTokens(same), ollama.json().get("prompt_eval_count").asInt());
            assertEquals(same.get("vmmkit").get("tokens"), ollama.json().get("tokens"));

            // The five markers are one token each. Spelled out, as the model without them in its vocabulary
            // reads them, each takes at least five: '<', '|', '_', '|' and '>' are in no word piece, so each
            // is a byte token of its own. The rest of the text has no "cc", the only pieces that differ.
            int spelled = promptTokens(completion(bed, "plain", CHATML));
            assertTrue(spelled - promptTokens(same) >= 5 * 4, "special tokens read as tokens: " + promptTokens(same) + " against " + spelled);
        }
    }

    @ParameterizedTest(name = "workers={0}")
    @ValueSource(booleans = {false, true})
    void withoutATemplateLlamaCppKnowsTheChatIsRenderedPlainly(boolean workers, @TempDir Path root) throws Exception {
        try (EngineTestBed bed = bed(root, workers)) {
            for (String model : List.of("plain", "unknown")) {
                assertEquals(Optional.empty(), rendered(bed, model, CHAT), model);
                JsonNode chat = chat(bed, model);
                JsonNode same = completion(bed, model, PLAIN);
                assertEquals(promptTokens(same), promptTokens(chat), model);
                assertEquals(same.get("vmmkit").get("tokens"), chat.get("vmmkit").get("tokens"), model);
            }
            String wizard = "{\"model\":\"chatml\",\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}";
            EngineTestBed.Answer openAi = bed.post("/v1/chat/completions", wizard);
            assertEquals(400, openAi.status(), openAi.text());
            assertEquals("invalid_request_error", openAi.json().get("error").get("type").asText());
            EngineTestBed.Answer ollama = bed.post("/api/chat", wizard);
            assertEquals(400, ollama.status(), ollama.text());
            assertTrue(ollama.json().get("error").asText().contains("role"), ollama.text());
        }
    }
}
