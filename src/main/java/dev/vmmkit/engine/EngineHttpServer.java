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
 *   GET    /health                    200 while the process serves at all
 *   GET    /ready                     200 once engines are scanned and the monitor runs; 503 while draining
 *   GET    /v1/models                 OpenAI: the models engines can serve
 *   POST   /v1/completions            OpenAI: completion, whole or streamed (server-sent events)
 *   POST   /v1/chat/completions       OpenAI: chat completion, whole or streamed
 *   POST   /api/generate              Ollama: {"model","prompt"}, streamed NDJSON unless "stream": false;
 *                                     loads the model on first use; the last object adds engine, tokens
 *   POST   /api/chat                  Ollama: {"model","messages"}, the same way
 *   GET    /api/tags                  Ollama: the models engines can serve
 *   GET    /api/engines               plugins with status available, loaded or rejected (and why)
 *   GET    /api/models                loaded models with device bytes, in-flight count, last use
 *   DELETE /api/models/{name}         unloads once the model's in-flight requests are done
 *   POST   /api/engines/{id}/reload   shadow reload from the binary on disk; answers once it serves
 *   GET    /metrics                   Prometheus text
 * </pre>
 * Errors are {@code {"error": "..."}} (OpenAI's {@code {"error": {"message", "type", ...}}} under
 * {@code /v1}) with 400, 404, 405, 413, 500, 502, 503 or 504. Every failure, the engine's included,
 * ends as an answer: nothing a request does stops the server. A streamed answer whose client goes
 * away stops its generation at the engine's next token.
 *
 * <p>Requests run on a pool of platform threads: engine calls are native code, which pins a virtual
 * thread to its carrier, so virtual threads would cap the engine calls in progress at the number of cores.
 */
public final class EngineHttpServer implements AutoCloseable {
    private static final ObjectMapper JSON = new ObjectMapper();
    /** Requests larger than this are refused (413); the rest of the body is read and dropped so the client sees the answer. */
    private static final int MAX_BODY_BYTES = 4 << 20;

    private final EngineHost host;
    private final EngineApi api;
    private final OpenAiApi openAi;
    private final OllamaApi ollama;
    private volatile boolean draining;
    private final HttpServer server;
    private final ExecutorService executor;

    private EngineHttpServer(EngineHost host, HttpServer server) {
        this.host = host;
        this.api = new EngineApi(host);
        this.openAi = new OpenAiApi(host);
        this.ollama = new OllamaApi(host);
        this.server = server;
        this.executor = Executors.newCachedThreadPool(Thread.ofPlatform().daemon().name("vmmkit-http-", 0).factory());
        server.setExecutor(executor);
        server.createContext("/", this::handle);
    }

    /** Serves {@code host} on 127.0.0.1:{@code port} (0: a free port). */
    public static EngineHttpServer start(EngineHost host, int port) throws IOException {
        return start(host, InetAddress.getLoopbackAddress(), port);
    }

    /** Serves {@code host} on {@code address}:{@code port} (0: a free port). */
    public static EngineHttpServer start(EngineHost host, InetAddress address, int port) throws IOException {
        // Small JSON answers: without TCP_NODELAY each waits on Nagle's algorithm and delayed ACKs.
        // Read once, when the JDK's server first starts; a value set on the command line wins.
        if (System.getProperty("sun.net.httpserver.nodelay") == null) System.setProperty("sun.net.httpserver.nodelay", "true");
        HttpServer server = HttpServer.create(new InetSocketAddress(address, port), 128);
        EngineHttpServer http = new EngineHttpServer(host, server);
        server.start();
        return http;
    }

    /** The address it listens on, as text. */
    public String address() {
        return server.getAddress().getAddress().getHostAddress();
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

    /**
     * Stops accepting connections, then waits up to {@code bound} for the requests in flight,
     * streamed ones included, to finish; {@code GET /ready} answers 503 from the start.
     */
    public void drain(java.time.Duration bound) {
        draining = true;
        server.stop((int) Math.max(1, bound.toSeconds()));
        executor.shutdown();
        try {
            executor.awaitTermination(bound.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private void handle(HttpExchange exchange) {
        Responder reply = new Responder(exchange, host.metrics());
        boolean openAiShape = exchange.getRequestURI().getPath().startsWith("/v1/");
        try {
            route(exchange, reply);
        } catch (RequestFailure failure) {
            error(reply, openAiShape, failure.status(), failure.getMessage());
        } catch (MethodNotAllowed wrongMethod) {
            exchange.getResponseHeaders().set("Allow", wrongMethod.allowed);
            error(reply, openAiShape, 405, exchange.getRequestMethod() + " is not allowed here; " + wrongMethod.getMessage());
        } catch (RuntimeException | LinkageError | StackOverflowError e) {
            EngineHost.LOGGER.log(System.Logger.Level.ERROR, "request " + exchange.getRequestURI() + " failed", e);
            error(reply, openAiShape, 500, "internal error: " + e);
        }
        exchange.close();
    }

    private void error(Responder reply, boolean openAiShape, int status, String message) {
        if (reply.answered()) { // a stream had begun: the dialect's own error line was written, or the client is gone
            reply.endStream();
            return;
        }
        reply.json(status, openAiShape ? OpenAiApi.error(status, message) : JSON.createObjectNode().put("error", message));
    }

    private int route(HttpExchange exchange, Responder reply) {
        String method = exchange.getRequestMethod();
        String[] path = exchange.getRequestURI().getPath().replaceAll("/+$", "").split("/");
        // path[0] is "" (the leading slash)
        if (path.length == 2 && path[1].equals("metrics")) {
            requireMethod(method, "GET");
            return reply.send(200, "text/plain; version=0.0.4; charset=utf-8", host.metricsText());
        }
        if (path.length == 2 && path[1].equals("health")) {
            requireMethod(method, "GET");
            return reply.json(200, JSON.createObjectNode().put("status", "ok"));
        }
        if (path.length == 2 && path[1].equals("ready")) {
            requireMethod(method, "GET");
            boolean ready = host.ready() && !draining;
            return reply.json(ready ? 200 : 503, JSON.createObjectNode().put("status", ready ? "ready" : draining ? "draining" : "stopped"));
        }
        if (path.length >= 3 && path[1].equals("v1")) {
            String rest = String.join("/", java.util.Arrays.copyOfRange(path, 2, path.length));
            switch (rest) {
                case "models" -> {
                    requireMethod(method, "GET");
                    return reply.json(200, openAi.models());
                }
                case "completions", "chat/completions" -> {
                    requireMethod(method, "POST");
                    openAi.complete(readBody(exchange), rest.startsWith("chat"), reply);
                    return 200;
                }
                default -> {
                }
            }
        }
        if (path.length >= 3 && path[1].equals("api")) {
            switch (path[2]) {
                case "engines" -> {
                    if (path.length == 3) {
                        requireMethod(method, "GET");
                        return reply.json(200, api.engines());
                    }
                    if (path.length == 5 && path[4].equals("reload")) {
                        requireMethod(method, "POST");
                        return reply.json(200, api.reload(path[3]));
                    }
                }
                case "generate", "chat" -> {
                    if (path.length == 3) {
                        requireMethod(method, "POST");
                        ollama.generate(readBody(exchange), path[2].equals("chat"), reply);
                        return 200;
                    }
                }
                case "tags" -> {
                    if (path.length == 3) {
                        requireMethod(method, "GET");
                        return reply.json(200, ollama.tags());
                    }
                }
                case "models" -> {
                    if (path.length == 3) {
                        requireMethod(method, "GET");
                        return reply.json(200, api.models());
                    }
                    if (path.length == 4) {
                        requireMethod(method, "DELETE");
                        return reply.json(200, api.unload(path[3]));
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
        long dropped;
        try (InputStream in = exchange.getRequestBody()) {
            bytes = in.readNBytes(MAX_BODY_BYTES + 1);
            dropped = bytes.length > MAX_BODY_BYTES ? in.transferTo(java.io.OutputStream.nullOutputStream()) : 0;
        } catch (IOException e) {
            throw RequestFailure.badRequest("cannot read the request body: " + e.getMessage());
        }
        if (bytes.length > MAX_BODY_BYTES) {
            throw RequestFailure.tooLarge("the body is " + (bytes.length + dropped) + " bytes, larger than the limit of " + MAX_BODY_BYTES + " bytes");
        }
        if (bytes.length == 0) throw RequestFailure.badRequest("the body is empty; expected {\"model\", \"prompt\"}");
        try {
            return JSON.readTree(bytes);
        } catch (IOException e) {
            throw RequestFailure.badRequest("the body is not valid JSON: " + (e instanceof JsonProcessingException j ? j.getOriginalMessage() : e.getMessage()));
        }
    }
}
