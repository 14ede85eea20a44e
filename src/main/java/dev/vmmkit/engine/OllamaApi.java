package dev.vmmkit.engine;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.time.Instant;
import java.util.List;

/**
 * Ollama's API, as its clients speak it: {@code POST /api/generate} and {@code POST /api/chat},
 * newline-delimited JSON objects as tokens come (the default) or one object with
 * {@code "stream": false}, and {@code GET /api/tags}. Errors are {@code {"error": "..."}}.
 * The final object also carries vmmkit's own fields: {@code engine}, {@code engine_version} and
 * {@code tokens} (each token's id and log-probabilities).
 */
final class OllamaApi {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final EngineHost host;

    OllamaApi(EngineHost host) {
        this.host = host;
    }

    /** {@code GET /api/tags}. */
    ObjectNode tags() {
        ObjectNode answer = JSON.createObjectNode();
        ArrayNode list = answer.putArray("models");
        for (String name : host.servableModels()) {
            list.addObject().put("name", name).put("model", name).put("modified_at", Instant.EPOCH.toString())
                    .put("size", 0).put("digest", "").putObject("details").put("format", "");
        }
        return answer;
    }

    /** {@code POST /api/generate} or {@code /api/chat}. */
    void generate(JsonNode raw, boolean chat, Responder reply) {
        JsonNode body = RequestFields.object(raw, chat ? "{\"model\", \"messages\"}" : "{\"model\", \"prompt\"}");
        String model = RequestFields.text(body, "model");
        Completion.Prompt prompt;
        if (chat) prompt = new ChatPrompt(RequestFields.chatMessages(body));
        else if (body.hasNonNull("system")) prompt = Completion.Prompt.text(RequestFields.text(body, "system") + "\n" + RequestFields.text(body, "prompt"));
        else prompt = Completion.Prompt.text(RequestFields.text(body, "prompt"));
        JsonNode options = body.path("options");
        if (!options.isMissingNode() && !options.isNull() && !options.isObject()) throw RequestFailure.badRequest("\"options\" must be an object");
        // num_predict -1 is Ollama's "no limit": the engine's default here
        boolean unlimited = options.isObject() && options.path("num_predict").isIntegralNumber() && options.path("num_predict").asInt() == -1;
        int maxTokens = options.isObject() && !unlimited ? RequestFields.maxTokens(options, "num_predict") : -1;
        Completion.Request request = new Completion.Request(model, prompt, maxTokens,
                options.isObject() ? RequestFields.number(options, "temperature", 0, 2) : null,
                options.isObject() ? RequestFields.number(options, "top_p", 0, 1) : null,
                options.isObject() ? RequestFields.seed(options, "seed") : null,
                options.isObject() ? RequestFields.stop(options, "stop") : List.of(),
                topLogprobs(body));
        if (!RequestFields.flag(body, "stream", true)) {
            Completion.Result result = Completion.whole(host, request);
            ObjectNode answer = line(model, chat, result.text()).put("done", true);
            end(answer, result);
            reply.json(200, answer);
            return;
        }
        Completion.Result result;
        try {
            result = Completion.run(host, request, () -> reply.startStream("application/x-ndjson"), (text, token) -> reply.chunk(line(model, chat, text).put("done", false) + "\n"));
        } catch (RequestFailure failure) {
            if (!reply.answered()) throw failure;
            reply.chunk(JSON.createObjectNode().put("error", failure.getMessage()) + "\n");
            reply.endStream();
            return;
        }
        if (!result.finish().equals("cancelled")) {
            ObjectNode last = line(model, chat, "").put("done", true);
            end(last, result);
            reply.chunk(last + "\n");
        }
        reply.endStream();
    }

    private static int topLogprobs(JsonNode body) {
        JsonNode node = body.get("top_logprobs");
        if (node == null || node.isNull()) return RequestFields.flag(body, "logprobs", false) ? 1 : 0;
        if (!node.isIntegralNumber() || node.asInt() < 0 || node.asInt() > 20) throw RequestFailure.badRequest("\"top_logprobs\" must be a whole number from 0 to 20");
        return node.asInt();
    }

    private static ObjectNode line(String model, boolean chat, String text) {
        ObjectNode line = JSON.createObjectNode().put("model", model).put("created_at", Instant.now().toString());
        if (chat) line.putObject("message").put("role", "assistant").put("content", text);
        else line.put("response", text);
        return line;
    }

    private static void end(ObjectNode answer, Completion.Result result) {
        answer.put("done_reason", OpenAiApi.finishReason(result.finish()))
                .put("total_duration", result.durationNanos()).put("load_duration", 0)
                .put("prompt_eval_count", Math.max(result.promptTokens(), 0))
                .put("eval_count", result.tokens().size())
                .put("eval_duration", result.firstTokenNanos() < 0 ? 0 : result.durationNanos() - result.firstTokenNanos())
                .put("engine", result.engine()).put("engine_version", result.engineVersion());
        tokens(answer.putArray("tokens"), result.tokens());
    }

    /** vmmkit's token list: {@code [{id, logprobs: [...]}]}, with {@code logprob} and {@code top_ids} when the engine gave them. */
    static void tokens(ArrayNode list, List<Generation.Token> tokens) {
        for (Generation.Token token : tokens) {
            ObjectNode item = list.addObject().put("id", token.id());
            boolean streamed = token.text().length > 0 || token.topIds().length > 0; // version 2
            if (streamed && !Float.isNaN(token.logprob())) item.put("logprob", token.logprob());
            ArrayNode logprobs = item.putArray("logprobs");
            for (float p : token.topLogprobs()) logprobs.add(p);
            if (token.topIds().length > 0) {
                ArrayNode ids = item.putArray("top_ids");
                for (long id : token.topIds()) ids.add(id);
            }
        }
    }
}
