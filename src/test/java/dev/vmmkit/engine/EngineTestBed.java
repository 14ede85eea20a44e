package dev.vmmkit.engine;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.vmmkit.driver.host.HostDriver;

import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;

/**
 * A real engine host on the host emulation, served over real HTTP, with plugin and model
 * directories in a temporary folder. Plugins are the C fixtures the Maven build compiles into
 * {@code target/test-native/engines}.
 */
final class EngineTestBed implements AutoCloseable {
    static final Path FIXTURES = Path.of("target", "test-native", "engines").toAbsolutePath();
    static final ObjectMapper JSON = new ObjectMapper();

    final Path engines;
    final Path models;
    private final HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(10)).build();
    private HostDriver driver;
    private java.util.function.UnaryOperator<dev.vmmkit.driver.VmmDriver> wrap = d -> d;
    private Isolation isolation = Isolation.IN_PROCESS;
    private Duration requestTimeout = EngineHost.Settings.DEFAULT_REQUEST_TIMEOUT;
    private IdlePolicy idlePolicy = IdlePolicy.EVICT;
    private long pauseHostMemory = EngineHost.Settings.AUTO_PAUSE_HOST_MEMORY;
    private EngineHost host;
    private EngineHttpServer server;

    EngineTestBed(Path root) throws IOException {
        this.engines = Files.createDirectories(root.resolve("engines"));
        this.models = Files.createDirectories(root.resolve("models"));
    }

    /** Installs fixture binary {@code fixtureFile} as engine {@code id}'s cpu plugin, with a manifest. */
    Path install(String id, String version, String fixtureFile, String formats, String extraJson) throws IOException {
        Path dir = Files.createDirectories(engines.resolve(id).resolve("cpu"));
        Files.copy(FIXTURES.resolve(fixtureFile), dir.resolve("engine.so"), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        writeManifest(dir, "{\"id\":\"" + id + "\",\"version\":\"" + version + "\",\"abi_version\":\"1\",\"gpu_backend\":\"cpu\","
                + "\"architectures\":[],\"formats\":[" + formats + "],\"binary\":\"engine.so\"" + extraJson + "}");
        return dir;
    }

    static void writeManifest(Path dir, String json) throws IOException {
        Files.writeString(dir.resolve("manifest.json"), json);
    }

    /** Rewrites the installed binary in place (same file, same inode), as a careless deploy would. */
    static void overwriteInPlace(Path target, Path source) throws IOException {
        try (OutputStream out = Files.newOutputStream(target, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
            Files.copy(source, out);
        }
    }

    /** A model file of {@code bytes} bytes. */
    void model(String fileName, int bytes) throws IOException {
        Files.write(models.resolve(fileName), new byte[bytes]);
    }

    /** Starts host and server: device capacity in bytes, thresholds, poll interval in ms. */
    EngineTestBed start(long deviceCapacity, double vramThreshold, long pollMillis, boolean watch, MemoryReader ram)
            throws IOException {
        driver = HostDriver.builder().capacity(deviceCapacity).build();
        host = EngineHost.start(new EngineHost.Settings(engines, models, vramThreshold, 0.9, Duration.ofMillis(pollMillis), watch,
                        isolation, requestTimeout, idlePolicy, pauseHostMemory),
                wrap.apply(driver), null, ram == null ? () -> new MemoryFigures(1, 100) : ram);
        server = EngineHttpServer.start(host, 0);
        return this;
    }

    /** Runs every engine instance in a worker process of its own; call before start. */
    EngineTestBed workers(Duration timeout) {
        this.isolation = Isolation.WORKER;
        this.requestTimeout = timeout;
        return this;
    }

    /** Pauses idle models instead of evicting them, keeping at most {@code hostBytes} in host memory; call before start. */
    EngineTestBed pauseIdleModels(long hostBytes) {
        this.idlePolicy = IdlePolicy.PAUSE;
        this.pauseHostMemory = hostBytes;
        return this;
    }

    /** Serves through an adaptor over the host driver (fault injection); call before start. */
    EngineTestBed wrapDriver(java.util.function.UnaryOperator<dev.vmmkit.driver.VmmDriver> adaptor) {
        this.wrap = adaptor;
        return this;
    }

    EngineTestBed start() throws IOException {
        return start(256L << 20, 0.9, 60_000, false, null);
    }

    int port() {
        return server.port();
    }

    EngineHost host() {
        return host;
    }

    /** An HTTP answer: status and parsed JSON body (or the text for /metrics). */
    record Answer(int status, JsonNode json, String text) {
        String error() {
            return json == null || json.get("error") == null ? null : json.get("error").asText();
        }
    }

    Answer get(String path) {
        return send(HttpRequest.newBuilder(uri(path)).GET().build());
    }

    Answer post(String path, String body) {
        return send(HttpRequest.newBuilder(uri(path)).POST(HttpRequest.BodyPublishers.ofString(body)).build());
    }

    Answer delete(String path) {
        return send(HttpRequest.newBuilder(uri(path)).DELETE().build());
    }

    Answer generate(String model, String prompt) {
        return post("/api/generate", "{\"model\":\"" + model + "\",\"prompt\":\"" + prompt + "\",\"stream\":false}");
    }

    /** The value of a metric line that starts with {@code prefix} (name and labels). */
    long metric(String prefix) {
        for (String line : get("/metrics").text().split("\n")) {
            if (line.startsWith(prefix + " ")) return Long.parseLong(line.substring(prefix.length() + 1).trim());
        }
        return -1;
    }

    JsonNode engine(String id) {
        for (JsonNode engine : get("/api/engines").json()) {
            if (engine.get("id").asText().equals(id)) return engine;
        }
        return null;
    }

    JsonNode loadedModel(String name) {
        for (JsonNode model : get("/api/models").json()) {
            if (model.get("name").asText().equals(name)) return model;
        }
        return null;
    }

    private URI uri(String path) {
        return URI.create("http://127.0.0.1:" + server.port() + path);
    }

    private Answer send(HttpRequest request) {
        try {
            HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString());
            JsonNode json = null;
            String type = response.headers().firstValue("Content-Type").orElse("");
            if (type.startsWith("application/json")) json = JSON.readTree(response.body());
            return new Answer(response.statusCode(), json, response.body());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    @Override
    public void close() {
        if (server != null) server.close();
        if (host != null) host.close();
        if (driver != null) driver.close();
    }
}
