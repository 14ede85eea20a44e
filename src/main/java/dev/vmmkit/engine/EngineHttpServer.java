package dev.vmmkit.engine;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * The host's HTTP API (JSON; the JDK's HTTP server, no extra dependency):
 * <pre>
 *   GET    /api/engines               plugins with status available, loaded or rejected (and why)
 *   POST   /api/generate              {"model","prompt"}: loads the model on first use, generates
 *   GET    /api/models                loaded models with device bytes, in-flight count, last use
 *   DELETE /api/models/{name}         unloads once the model's in-flight requests are done
 *   POST   /api/engines/{id}/reload   shadow reload from the binary on disk; answers once it serves
 *   GET    /metrics                   Prometheus text
 * </pre>
 * Errors are {@code {"error": "..."}} with 400, 404, 405, 500 or 503. Every failure, the engine's
 * included, ends as an answer: nothing a request does stops the server.
 *
 * <p>Requests run on a pool of platform threads: engine calls are native code, which pins a virtual
 * thread to its carrier, so virtual threads would cap the engine calls in progress at the number of cores.
 */
public final class EngineHttpServer implements AutoCloseable {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int MAX_BODY_BYTES = 1 << 20;

    private final EngineHost host;
    private final HttpServer server;
    private final ExecutorService executor;

    private EngineHttpServer(EngineHost host, HttpServer server) {
        this.host = host;
        this.server = server;
        this.executor = Executors.newCachedThreadPool(Thread.ofPlatform().daemon().name("vmmkit-http-", 0).factory());
        server.setExecutor(executor);
        server.createContext("/", this::handle);
    }

    /** Serves {@code host} on 127.0.0.1:{@code port} (0: a free port). */
    public static EngineHttpServer start(EngineHost host, int port) throws IOException {
        HttpServer server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 128);
        EngineHttpServer http = new EngineHttpServer(host, server);
        server.start();
        return http;
    }

    /** The port it listens on. */
    public int port() {
        return server.getAddress().getPort();
    }

    @Override
    public void close() {
        server.stop(0);
        executor.shutdownNow();
    }

    private void handle(HttpExchange exchange) {
        try {
            route(exchange);
        } catch (RequestFailure failure) {
            error(exchange, failure.status(), failure.getMessage());
        } catch (MethodNotAllowed wrongMethod) {
            exchange.getResponseHeaders().set("Allow", wrongMethod.allowed);
            error(exchange, 405, exchange.getRequestMethod() + " is not allowed here; " + wrongMethod.getMessage());
        } catch (RuntimeException | LinkageError | StackOverflowError e) {
            EngineHost.LOGGER.log(System.Logger.Level.ERROR, "request " + exchange.getRequestURI() + " failed", e);
            error(exchange, 500, "internal error: " + e);
        }
        exchange.close();
    }

    private int route(HttpExchange exchange) {
        String method = exchange.getRequestMethod();
        String[] path = exchange.getRequestURI().getPath().replaceAll("/+$", "").split("/");
        // path[0] is "" (the leading slash)
        if (path.length == 2 && path[1].equals("metrics")) {
            requireMethod(method, "GET");
            return send(exchange, 200, "text/plain; version=0.0.4; charset=utf-8", host.metricsText());
        }
        if (path.length >= 3 && path[1].equals("api")) {
            switch (path[2]) {
                case "engines" -> {
                    if (path.length == 3) {
                        requireMethod(method, "GET");
                        return json(exchange, 200, engines());
                    }
                    if (path.length == 5 && path[4].equals("reload")) {
                        requireMethod(method, "POST");
                        return json(exchange, 200, reload(path[3]));
                    }
                }
                case "generate" -> {
                    if (path.length == 3) {
                        requireMethod(method, "POST");
                        return json(exchange, 200, generate(readBody(exchange)));
                    }
                }
                case "models" -> {
                    if (path.length == 3) {
                        requireMethod(method, "GET");
                        return json(exchange, 200, models());
                    }
                    if (path.length == 4) {
                        requireMethod(method, "DELETE");
                        if (!host.registry().unload(path[3])) throw RequestFailure.notFound("model '" + path[3] + "' is not loaded");
                        return json(exchange, 200, JSON.createObjectNode().put("unloaded", path[3]));
                    }
                }
                default -> {
                }
            }
        }
        throw RequestFailure.notFound("no such endpoint: " + method + " " + exchange.getRequestURI().getPath());
    }

    private ArrayNode engines() {
        ArrayNode list = JSON.createArrayNode();
        for (EngineEntry entry : host.catalog().entries()) {
            PluginSnapshot snapshot = entry.snapshot();
            ObjectNode item = list.addObject().put("id", entry.id());
            if (snapshot != null) {
                item.put("version", snapshot.info().version()).put("abi_version", snapshot.info().abiVersion());
            } else {
                EngineManifest claimed = readableManifest(entry);
                if (claimed == null) item.putNull("version").putNull("abi_version");
                else item.put("version", claimed.version()).put("abi_version", claimed.abiVersion());
            }
            item.put("gpu_backend", entry.backend());
            item.put("status", snapshot == null ? "rejected" : host.registry().serves(entry) ? "loaded" : "available");
            if (entry.rejection() != null) item.put("reason", entry.rejection());
            if (entry.lastReloadError() != null) item.put("last_reload_error", entry.lastReloadError());
        }
        return list;
    }

    /** What a refused plugin's manifest claims, when it can be read at all. */
    private static EngineManifest readableManifest(EngineEntry entry) {
        try {
            return EngineManifest.read(entry.dir());
        } catch (EngineManifest.InvalidManifestException e) {
            return null;
        }
    }

    private ObjectNode generate(JsonNode body) {
        if (body == null || !body.isObject()) throw RequestFailure.badRequest("the body must be a JSON object {\"model\", \"prompt\"}");
        JsonNode model = body.get("model");
        JsonNode prompt = body.get("prompt");
        if (model == null || !model.isTextual()) throw RequestFailure.badRequest("\"model\" must be a string");
        if (prompt == null || !prompt.isTextual()) throw RequestFailure.badRequest("\"prompt\" must be a string");
        if (prompt.asText().indexOf('\0') >= 0) throw RequestFailure.badRequest("\"prompt\" must not contain NUL characters");
        List<EngineInstance.Token> tokens;
        EngineManifest manifest;
        try (ModelRegistry.Lease lease = host.registry().acquire(model.asText())) {
            manifest = lease.instance().manifest();
            tokens = lease.instance().generate(prompt.asText());
        }
        ObjectNode answer = JSON.createObjectNode()
                .put("model", model.asText()).put("engine", manifest.id()).put("engine_version", manifest.version());
        ArrayNode list = answer.putArray("tokens");
        for (EngineInstance.Token token : tokens) {
            ArrayNode logprobs = list.addObject().put("id", token.id()).putArray("logprobs");
            for (float p : token.logprobs()) logprobs.add(p);
        }
        return answer;
    }

    private ArrayNode models() {
        ArrayNode list = JSON.createArrayNode();
        for (ServedModel model : host.registry().models()) {
            EngineInstance instance = model.instance();
            if (instance == null) continue;
            list.addObject().put("name", model.name()).put("engine", instance.manifest().id())
                    .put("engine_version", instance.manifest().version())
                    .put("gpu_backend", instance.manifest().gpuBackend())
                    .put("device_bytes", instance.deviceBytes())
                    .put("in_flight", instance.gate().inFlight())
                    .put("last_used", Instant.ofEpochMilli(model.lastUsedMillis()).toString());
        }
        return list;
    }

    private ObjectNode reload(String id) {
        List<EngineReloader.Outcome> outcomes = host.reloader().reload(id);
        ObjectNode answer = JSON.createObjectNode().put("engine", id);
        ArrayNode list = answer.putArray("reloaded");
        for (EngineReloader.Outcome outcome : outcomes) {
            ObjectNode item = list.addObject().put("gpu_backend", outcome.backend())
                    .put("previous_version", outcome.previousVersion()).put("version", outcome.version())
                    .put("drain_ms", outcome.drainMillis());
            ArrayNode models = item.putArray("models");
            outcome.models().forEach(models::add);
        }
        return answer;
    }

    private static void requireMethod(String actual, String expected) {
        if (!actual.equals(expected)) throw new MethodNotAllowed(expected);
    }

    /** A known path asked with the wrong method: 405 with Allow. */
    private static final class MethodNotAllowed extends RuntimeException {
        final String allowed;

        MethodNotAllowed(String allowed) {
            super("use " + allowed);
            this.allowed = allowed;
        }
    }

    private static JsonNode readBody(HttpExchange exchange) {
        byte[] bytes;
        try (InputStream in = exchange.getRequestBody()) {
            bytes = in.readNBytes(MAX_BODY_BYTES + 1);
        } catch (IOException e) {
            throw RequestFailure.badRequest("cannot read the request body: " + e.getMessage());
        }
        if (bytes.length > MAX_BODY_BYTES) throw RequestFailure.badRequest("the body is larger than " + MAX_BODY_BYTES + " bytes");
        if (bytes.length == 0) throw RequestFailure.badRequest("the body is empty; expected {\"model\", \"prompt\"}");
        try {
            return JSON.readTree(bytes);
        } catch (IOException e) {
            throw RequestFailure.badRequest("the body is not valid JSON: " + (e instanceof JsonProcessingException j ? j.getOriginalMessage() : e.getMessage()));
        }
    }

    private int json(HttpExchange exchange, int status, JsonNode body) {
        return send(exchange, status, "application/json", body.toString());
    }

    private int error(HttpExchange exchange, int status, String message) {
        return json(exchange, status, JSON.createObjectNode().put("error", message));
    }

    /** Counts the answer (before the client can see it, so /metrics never lags behind) and sends it. */
    private int send(HttpExchange exchange, int status, String contentType, String body) {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        host.metrics().answered(status);
        try {
            exchange.getResponseHeaders().set("Content-Type", contentType);
            exchange.sendResponseHeaders(status, bytes.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(bytes);
            }
        } catch (IOException e) {
            // the client went away; nothing to answer
        }
        return status;
    }
}
