package dev.vmmkit.engine;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * The host's HTTP API on the JDK's HTTP server (no extra dependency): routing, request bodies,
 * answers and error statuses; {@link EngineApi} does what each call asks:
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
    private final EngineApi api;
    private final HttpServer server;
    private final ExecutorService executor;

    private EngineHttpServer(EngineHost host, HttpServer server) {
        this.host = host;
        this.api = new EngineApi(host);
        this.server = server;
        this.executor = Executors.newCachedThreadPool(Thread.ofPlatform().daemon().name("vmmkit-http-", 0).factory());
        server.setExecutor(executor);
        server.createContext("/", this::handle);
    }

    /** Serves {@code host} on 127.0.0.1:{@code port} (0: a free port). */
    public static EngineHttpServer start(EngineHost host, int port) throws IOException {
        // Small JSON answers: without TCP_NODELAY each waits on Nagle's algorithm and delayed ACKs.
        // Read once, when the JDK's server first starts; a value set on the command line wins.
        if (System.getProperty("sun.net.httpserver.nodelay") == null) System.setProperty("sun.net.httpserver.nodelay", "true");
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
                        return json(exchange, 200, api.engines());
                    }
                    if (path.length == 5 && path[4].equals("reload")) {
                        requireMethod(method, "POST");
                        return json(exchange, 200, api.reload(path[3]));
                    }
                }
                case "generate" -> {
                    if (path.length == 3) {
                        requireMethod(method, "POST");
                        return json(exchange, 200, api.generate(readBody(exchange)));
                    }
                }
                case "models" -> {
                    if (path.length == 3) {
                        requireMethod(method, "GET");
                        return json(exchange, 200, api.models());
                    }
                    if (path.length == 4) {
                        requireMethod(method, "DELETE");
                        return json(exchange, 200, api.unload(path[3]));
                    }
                }
                default -> {
                }
            }
        }
        throw RequestFailure.notFound("no such endpoint: " + method + " " + exchange.getRequestURI().getPath());
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
