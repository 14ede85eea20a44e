package dev.vmmkit.engine;

import com.fasterxml.jackson.databind.node.ObjectNode;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.Lock;

/**
 * One generation request as both HTTP dialects (OpenAI's and Ollama's) ask it, and its run: leases
 * the model, streams the engine's tokens through a {@link TextStream} (UTF-8 joining, stop
 * strings) to a {@link Listener}, and records the per-model figures. A listener that returns false
 * (its client went away) stops the engine at its next token; the lease, and with it the model, is
 * free as soon as the engine returned.
 */
final class Completion {
    /** The largest max_tokens a request may ask. */
    static final int MAX_TOKENS_LIMIT = 1 << 30;
    private static final com.fasterxml.jackson.databind.ObjectMapper JSON = new com.fasterxml.jackson.databind.ObjectMapper();

    /** What the engine continues: text as it is, or a chat rendered for the engine that serves it ({@link ChatPrompt}). */
    interface Prompt {
        /** The prompt's text for {@code engine}; the caller has entered its gate. */
        String render(RunningEngine engine);

        static Prompt text(String text) {
            return engine -> text;
        }
    }

    /**
     * @param maxTokens   -1 for the engine's default
     * @param topLogprobs alternatives per token to report, 0 for none
     */
    record Request(String model, Prompt prompt, int maxTokens, Double temperature, Double topP, Long seed,
                   List<String> stop, int topLogprobs) {
        /** The ABI's request_json. */
        String requestJson() {
            ObjectNode json = JSON.createObjectNode();
            if (maxTokens >= 0) json.put("max_tokens", maxTokens);
            if (temperature != null) json.put("temperature", temperature);
            if (topP != null) json.put("top_p", topP);
            if (seed != null) json.put("seed", seed);
            if (!stop.isEmpty()) stop.forEach(json.putArray("stop")::add);
            if (topLogprobs > 0) json.put("top_logprobs", topLogprobs);
            return json.toString();
        }
    }

    /** Receives the text as it becomes final, with the token that completed it (null for the held-back end). */
    interface Listener {
        boolean delta(String text, Generation.Token token);
    }

    /**
     * What the run produced.
     *
     * @param finish       length, stop (end of sequence or a stop string), cancelled or error
     * @param promptTokens the engine's count, or -1 when it gave none
     */
    record Result(String text, List<Generation.Token> tokens, String finish, int promptTokens, String engine,
                  String engineVersion, long durationNanos, long firstTokenNanos) {
    }

    private Completion() {
    }

    /**
     * Runs {@code request} on its model for an answer given whole at the end (no client sees a
     * token before then).
     *
     * @throws RequestFailure 404 for an unknown model, and what the engine's lease and call throw
     */
    static Result whole(EngineHost host, Request request) {
        return run(host, request, () -> { }, null);
    }

    /**
     * Runs {@code request}, calling {@code leased} once the model is loaded and leased, before the
     * first token: a streamed answer starts there, so a request for an unknown model or one that
     * fails to load still gets its error status. A null {@code listener} is an answer given whole
     * ({@link #whole}).
     */
    static Result run(EngineHost host, Request request, Runnable leased, Listener listener) {
        long start = System.nanoTime();
        ModelRegistry.Lease lease = host.registry().acquire(request.model());
        Lock turn = null;
        try {
            turn = lease.instance().turn();
            if (turn != null) turn.lock();
            return generate(host, request, leased, listener, lease, start);
        } finally {
            lease.close(); // inside the turn: the next request finds this one counted out of the model too
            if (turn != null) turn.unlock();
        }
    }

    /** The request's generation and its accounting, on the instance {@code lease} holds (in its turn, where it has one). */
    private static Result generate(EngineHost host, Request request, Runnable leased, Listener listener,
                                   ModelRegistry.Lease lease, long start) {
        String engine = lease.instance().manifest().id();
        String engineVersion = lease.instance().manifest().version();
        TextStream text = new TextStream(request.stop());
        List<Generation.Token> tokens = new ArrayList<>();
        long[] firstToken = {-1};
        boolean[] clientGone = {false};
        Generation.Outcome outcome;
        try {
            String prompt = request.prompt().render(lease.instance());
            leased.run();
            Generation.Sink sink = token -> {
                if (firstToken[0] < 0) firstToken[0] = System.nanoTime() - start;
                tokens.add(token);
                String delta = text.add(token.text());
                if (listener != null && (!delta.isEmpty() || token.text().length == 0)) {
                    if (!listener.delta(delta, token)) {
                        clientGone[0] = true;
                        return false;
                    }
                }
                return !text.stopped();
            };
            // Without a listener or a stop string nothing looks at a token before the end.
            if (listener == null && request.stop().isEmpty()) sink = Generation.Sink.atEnd(sink);
            outcome = lease.instance().stream(prompt, request.requestJson(), sink);
        } catch (RequestFailure failure) {
            host.metrics().serving().generated(request.model(), "error", System.nanoTime() - start, firstToken[0], 0, tokens.size());
            throw failure;
        }
        if (outcome.firstTokenAt() >= 0) firstToken[0] = outcome.firstTokenAt() - start;
        String finish = clientGone[0] ? "cancelled"
                : text.stopped() ? "stop"
                : outcome.finish() == Generation.Finish.CANCELLED ? "cancelled" : outcome.finish().label();
        if (!clientGone[0]) {
            String rest = text.finish();
            if (!rest.isEmpty() && listener != null) listener.delta(rest, null);
        }
        long duration = System.nanoTime() - start;
        // counted in the request's turn, so the next request on this instance sees these figures
        host.metrics().serving().generated(request.model(), finish, duration, firstToken[0], outcome.promptTokens(), tokens.size());
        return new Result(text.text(), tokens, finish, outcome.promptTokens(), engine, engineVersion, duration, firstToken[0]);
    }
}
