package dev.vmmkit.engine;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicLong;

/**
 * OpenAI's API, as its clients speak it: {@code GET /v1/models}, {@code POST /v1/completions} and
 * {@code POST /v1/chat/completions}, whole or streamed as server-sent events ending in
 * {@code data: [DONE]}. Errors are {@code {"error": {"message", "type", "param", "code"}}}.
 */
final class OpenAiApi {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final AtomicLong IDS = new AtomicLong();

    private final EngineHost host;

    OpenAiApi(EngineHost host) {
        this.host = host;
    }

    /** OpenAI's error shape. */
    static ObjectNode error(int status, String message) {
        ObjectNode body = JSON.createObjectNode();
        String type = status == 404 ? "not_found_error" : status < 500 ? "invalid_request_error" : "server_error";
        body.putObject("error").put("message", message).put("type", type).putNull("param")
                .put("code", status == 404 ? "model_not_found" : null);
        return body;
    }

    /** {@code GET /v1/models}: every model file an engine serves. */
    ObjectNode models() {
        ObjectNode answer = JSON.createObjectNode().put("object", "list");
        ArrayNode data = answer.putArray("data");
        for (String name : host.servableModels()) {
            data.addObject().put("id", name).put("object", "model").put("created", 0).put("owned_by", "vmmkit");
        }
        return answer;
    }

    /** {@code POST /v1/completions} or {@code /v1/chat/completions}. */
    void complete(JsonNode raw, boolean chat, Responder reply) {
        JsonNode body = RequestFields.object(raw, chat ? "{\"model\", \"messages\"}" : "{\"model\", \"prompt\"}");
        String model = RequestFields.text(body, "model");
        Completion.Prompt prompt = chat ? new ChatPrompt(RequestFields.chatMessages(body))
                : Completion.Prompt.text(RequestFields.text(body, "prompt"));
        int maxTokens = RequestFields.maxTokens(body, body.has("max_completion_tokens") ? "max_completion_tokens" : "max_tokens");
        int top = topLogprobs(body, chat);
        Completion.Request request = new Completion.Request(model, prompt, maxTokens,
                RequestFields.number(body, "temperature", 0, 2), RequestFields.number(body, "top_p", 0, 1),
                RequestFields.seed(body, "seed"), RequestFields.stop(body, "stop"), top);
        boolean logprobs = chat ? RequestFields.flag(body, "logprobs", false) : body.hasNonNull("logprobs");
        String id = (chat ? "chatcmpl-" : "cmpl-") + IDS.incrementAndGet();
        long created = System.currentTimeMillis() / 1000;
        if (!RequestFields.flag(body, "stream", false)) {
            Completion.Result result = Completion.whole(host, request);
            ObjectNode answer = head(id, chat ? "chat.completion" : "text_completion", created, model);
            ObjectNode choice = answer.putArray("choices").addObject().put("index", 0);
            if (chat) choice.putObject("message").put("role", "assistant").put("content", result.text());
            else choice.put("text", result.text());
            if (logprobs) logprobs(choice, result.tokens(), chat, top);
            else choice.putNull("logprobs");
            choice.put("finish_reason", finishReason(result.finish()));
            usage(answer, result);
            vmmkitTokens(answer, result);
            reply.json(200, answer);
            return;
        }
        boolean usage = body.path("stream_options").path("include_usage").asBoolean(false);
        Runnable start = () -> {
            reply.startStream("text/event-stream");
            if (chat) {
                ObjectNode first = head(id, "chat.completion.chunk", created, model);
                ObjectNode choice = first.putArray("choices").addObject().put("index", 0);
                choice.putObject("delta").put("role", "assistant").put("content", "");
                choice.putNull("logprobs").putNull("finish_reason");
                reply.chunk(event(first));
            }
        };
        Completion.Result result;
        try {
            result = Completion.run(host, request, start, (text, token) -> {
                ObjectNode chunk = head(id, chat ? "chat.completion.chunk" : "text_completion", created, model);
                ObjectNode choice = chunk.putArray("choices").addObject().put("index", 0);
                if (chat) choice.putObject("delta").put("content", text);
                else choice.put("text", text);
                if (logprobs && token != null) logprobs(choice, java.util.List.of(token), chat, top);
                else choice.putNull("logprobs");
                choice.putNull("finish_reason");
                return reply.chunk(event(chunk));
            });
        } catch (RequestFailure failure) {
            if (!reply.answered()) throw failure;
            reply.chunk(event(error(failure.status(), failure.getMessage())));
            reply.endStream();
            return;
        }
        if (result.finish().equals("cancelled")) {
            reply.endStream();
            return;
        }
        ObjectNode last = head(id, chat ? "chat.completion.chunk" : "text_completion", created, model);
        ObjectNode choice = last.putArray("choices").addObject().put("index", 0);
        if (chat) choice.putObject("delta");
        else choice.put("text", "");
        choice.putNull("logprobs").put("finish_reason", finishReason(result.finish()));
        reply.chunk(event(last));
        if (usage) {
            ObjectNode totals = head(id, chat ? "chat.completion.chunk" : "text_completion", created, model);
            totals.putArray("choices");
            usage(totals, result);
            reply.chunk(event(totals));
        }
        reply.chunk("data: [DONE]\n\n");
        reply.endStream();
    }

    private static int topLogprobs(JsonNode body, boolean chat) {
        JsonNode node = body.get(chat ? "top_logprobs" : "logprobs");
        if (node == null || node.isNull()) return chat && RequestFields.flag(body, "logprobs", false) ? 1 : 0;
        if (!node.isIntegralNumber() || node.asInt() < 0 || node.asInt() > 20) {
            throw RequestFailure.badRequest("\"" + (chat ? "top_logprobs" : "logprobs") + "\" must be a whole number from 0 to 20");
        }
        return Math.max(node.asInt(), chat ? 0 : 1);
    }

    private static String event(JsonNode data) {
        return "data: " + data + "\n\n";
    }

    private static ObjectNode head(String id, String object, long created, String model) {
        return JSON.createObjectNode().put("id", id).put("object", object).put("created", created).put("model", model)
                .put("system_fingerprint", "vmmkit");
    }

    /** OpenAI knows length and stop; an engine error ends a stream without one. */
    static String finishReason(String finish) {
        return finish.equals("length") ? "length" : "stop";
    }

    private static void usage(ObjectNode answer, Completion.Result result) {
        int prompt = Math.max(result.promptTokens(), 0);
        answer.putObject("usage").put("prompt_tokens", prompt).put("completion_tokens", result.tokens().size())
                .put("total_tokens", prompt + result.tokens().size());
    }

    /** The engine's token ids and log-probabilities, kept beside OpenAI's fields. */
    private static void vmmkitTokens(ObjectNode answer, Completion.Result result) {
        ObjectNode extra = answer.putObject("vmmkit").put("engine", result.engine()).put("engine_version", result.engineVersion());
        OllamaApi.tokens(extra.putArray("tokens"), result.tokens());
    }

    /** The {@code k} most likely alternatives at a token's step, best first: (id, log-probability); id -1 when unknown. */
    static java.util.List<long[]> alternatives(Generation.Token token, int k) {
        float[] values = token.topLogprobs();
        Integer[] order = new Integer[values.length];
        for (int i = 0; i < order.length; i++) order[i] = i;
        boolean byId = token.topIds().length == 0 && token.text().length > 0; // the whole distribution, indexed by id
        if (byId) java.util.Arrays.sort(order, (x, y) -> Float.compare(values[y], values[x]));
        java.util.List<long[]> out = new java.util.ArrayList<>();
        for (int i = 0; i < Math.min(k, order.length); i++) {
            int at = order[i];
            long id = byId ? at : at < token.topIds().length ? token.topIds()[at] : -1;
            out.add(new long[]{id, Float.floatToIntBits(values[at])});
        }
        return out;
    }

    private static void logprobs(ObjectNode choice, java.util.List<Generation.Token> tokens, boolean chat, int k) {
        if (chat) {
            ArrayNode content = choice.putObject("logprobs").putArray("content");
            for (Generation.Token token : tokens) {
                ObjectNode item = content.addObject().put("token", piece(token)).put("logprob", logprob(token));
                bytes(item, token.text());
                ArrayNode top = item.putArray("top_logprobs");
                for (long[] alt : alternatives(token, k)) {
                    top.addObject().put("token", alt[0] == token.id() ? piece(token) : "<" + alt[0] + ">")
                            .put("logprob", Float.intBitsToFloat((int) alt[1])).putNull("bytes");
                }
            }
            return;
        }
        ObjectNode lp = choice.putObject("logprobs");
        ArrayNode texts = lp.putArray("tokens");
        ArrayNode values = lp.putArray("token_logprobs");
        ArrayNode tops = lp.putArray("top_logprobs");
        ArrayNode offsets = lp.putArray("text_offset");
        int offset = 0;
        for (Generation.Token token : tokens) {
            texts.add(piece(token));
            values.add(logprob(token));
            offsets.add(offset);
            offset += piece(token).length();
            ObjectNode top = tops.addObject();
            for (long[] alt : alternatives(token, k)) {
                top.put(alt[0] == token.id() ? piece(token) : "<" + alt[0] + ">", Float.intBitsToFloat((int) alt[1]));
            }
        }
    }

    private static double logprob(Generation.Token token) {
        return Float.isNaN(token.logprob()) ? 0 : token.logprob();
    }

    private static String piece(Generation.Token token) {
        return new String(token.text(), StandardCharsets.UTF_8);
    }

    private static void bytes(ObjectNode item, byte[] text) {
        ArrayNode bytes = item.putArray("bytes");
        for (byte b : text) bytes.add(b & 0xff);
    }
}
