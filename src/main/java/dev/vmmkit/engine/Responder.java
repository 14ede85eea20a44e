package dev.vmmkit.engine;

import com.fasterxml.jackson.databind.JsonNode;
import com.sun.net.httpserver.HttpExchange;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;

/**
 * Answers one HTTP exchange: a whole body at once, or a stream of chunks (server-sent events or
 * newline-delimited JSON) flushed one by one, so each token reaches the client as it is made.
 * A write that fails means the client went away; {@link #chunk} then returns false.
 */
final class Responder {
    private final HttpExchange exchange;
    private final EngineMetrics metrics;
    private OutputStream stream;
    private boolean gone;
    private boolean answered;

    Responder(HttpExchange exchange, EngineMetrics metrics) {
        this.exchange = exchange;
        this.metrics = metrics;
    }

    /** True once a status went out (a failure after that can only end the stream). */
    boolean answered() {
        return answered;
    }

    int json(int status, JsonNode body) {
        return send(status, "application/json", body.toString());
    }

    /** Counts the answer (before the client can see it, so /metrics never lags behind) and sends it. */
    int send(int status, String contentType, String body) {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        metrics.answered(status);
        answered = true;
        try {
            exchange.getResponseHeaders().set("Content-Type", contentType);
            exchange.sendResponseHeaders(status, bytes.length == 0 ? -1 : bytes.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(bytes);
            }
        } catch (IOException e) {
            // the client went away; nothing to answer
        }
        return status;
    }

    /** Starts a 200 streamed answer (chunked transfer encoding). */
    void startStream(String contentType) {
        metrics.answered(200);
        answered = true;
        exchange.getResponseHeaders().set("Content-Type", contentType);
        exchange.getResponseHeaders().set("Cache-Control", "no-cache");
        try {
            exchange.sendResponseHeaders(200, 0);
            stream = exchange.getResponseBody();
        } catch (IOException e) {
            gone = true;
        }
    }

    /** Writes and flushes one chunk; false when the client went away. */
    boolean chunk(String text) {
        if (gone) return false;
        try {
            stream.write(text.getBytes(StandardCharsets.UTF_8));
            stream.flush();
            return true;
        } catch (IOException e) {
            gone = true;
            return false;
        }
    }

    /** Ends a streamed answer. */
    void endStream() {
        if (stream == null) return;
        try {
            stream.close();
        } catch (IOException ignored) {
            // the client went away
        }
    }
}
