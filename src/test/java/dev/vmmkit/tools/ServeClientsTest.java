package dev.vmmkit.tools;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code vmmkit serve} as a process, as clients meet it: the official {@code openai} and
 * {@code ollama} JavaScript clients (installed from the npm registry by
 * scripts/install-test-deps.sh) run src/test/js/clients.mjs against it, and SIGTERM during three
 * streams in flight lets all three finish before the process exits 0.
 */
class ServeClientsTest {
    private static final Path ECHO = Path.of("target", "test-native", "engines", "echo", "cpu").toAbsolutePath();
    private static final Path CLIENTS = Path.of(".deps", "js-clients", "node_modules").toAbsolutePath();
    private static final Path LLAMA = Path.of("target", "engines", "llama", "cpu").toAbsolutePath();

    /** A started {@code vmmkit serve} on the echo example, its base URL and its log. */
    private record Served(Process process, String base, Path log) {
    }

    private static Served serve(Path root, String... models) throws IOException {
        Path plugin = Files.createDirectories(root.resolve("engines/echo/cpu"));
        Files.copy(ECHO.resolve("libecho_engine.so"), plugin.resolve("libecho_engine.so"));
        Files.copy(Path.of("examples/echo-engine/manifest-cpu.json"), plugin.resolve("manifest.json"));
        Path dir = Files.createDirectories(root.resolve("models"));
        for (String model : models) Files.write(dir.resolve(model + ".bin"), new byte[1 << 16]);
        Path log = root.resolve("serve.log");
        Process process = new ProcessBuilder(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"),
                VmmkitCli.class.getName(), "serve", "--engines", root.resolve("engines").toString(),
                "--models", dir.toString(), "--port", "0", "--driver", "host", "--device-memory", "64MiB",
                "--isolation", "in-process", "--drain-timeout", "60s"))
                .redirectError(log.toFile()).start();
        String ready = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8)).readLine();
        assertTrue(ready != null && ready.startsWith("listening on http://"), ready + "\n" + Files.readString(log));
        return new Served(process, ready.substring("listening on ".length()), log);
    }

    @Test
    void theOfficialOpenAiAndOllamaClientsTalkToIt(@TempDir Path root) throws Exception {
        Assumptions.assumeTrue(Files.isDirectory(CLIENTS.resolve("openai")) && Files.isDirectory(CLIENTS.resolve("ollama")),
                "the openai and ollama npm packages are not in " + CLIENTS + " (scripts/install-test-deps.sh installs them; it needs npm and the npm registry)");
        // The tiny GGUF model on the llama engine where llama.cpp was fetched, else the echo engine;
        // the cancellation runs on echo either way (a generation only a client going away can end).
        String model = "endless";
        if (Files.isRegularFile(LLAMA.resolve("libllama_engine.so"))) {
            Path plugin = Files.createDirectories(root.resolve("engines/llama/cpu"));
            Files.copy(LLAMA.resolve("libllama_engine.so"), plugin.resolve("libllama_engine.so"));
            // one thread: ggml's threads wait for each other by spinning, which a loaded 2-core machine punishes
            Files.writeString(plugin.resolve("manifest.json"), Files.readString(LLAMA.resolve("manifest.json"))
                    .replace("\"options\": {", "\"options\": {\"threads\": 1, "));
            Files.createDirectories(root.resolve("models"));
            Process tiny = new ProcessBuilder("bash", "scripts/tiny-gguf.sh", root.resolve("models/tiny.gguf").toString())
                    .redirectErrorStream(true).start();
            String said = new String(tiny.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertTrue(tiny.waitFor(120, TimeUnit.SECONDS));
            if (tiny.exitValue() == 0) model = "tiny";
            else System.err.println("ServeClientsTest: scripts/tiny-gguf.sh cannot run here, the clients talk to the echo engine: " + said);
        }
        Served served = serve(root, "endless");
        try {
            Path out = root.resolve("clients.out");
            ProcessBuilder node = new ProcessBuilder("node", Path.of("src/test/js/clients.mjs").toAbsolutePath().toString(), served.base(),
                    model, "endless")
                    .redirectErrorStream(true).redirectOutput(out.toFile());
            node.environment().put("NODE_PATH", CLIENTS.toString());
            Process clients = node.start();
            assertTrue(clients.waitFor(300, TimeUnit.SECONDS), "the client script did not finish");
            String said = Files.readString(out);
            assertEquals(0, clients.exitValue(), said + "\n--- serve log\n" + Files.readString(served.log()));
            assertTrue(said.contains("checks passed"), said);
            System.err.println("ServeClientsTest on model " + model + ":\n" + said);
        } finally {
            served.process().destroy();
            assertTrue(served.process().waitFor(60, TimeUnit.SECONDS));
        }
    }

    @Test
    void sigtermLetsThreeStreamsInFlightFinishThenExitsZero(@TempDir Path root) throws Exception {
        Served served = serve(root, "a", "b", "c");
        HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
        int tokens = 20000;
        List<BufferedReader> streams = new ArrayList<>();
        for (String model : List.of("a", "b", "c")) {
            HttpRequest request = HttpRequest.newBuilder(URI.create(served.base() + "/v1/completions"))
                    .POST(HttpRequest.BodyPublishers.ofString("{\"model\":\"" + model + "\",\"prompt\":\"abcd\",\"max_tokens\":" + tokens + ",\"stream\":true}"))
                    .build();
            HttpResponse<InputStream> response = client.send(request, HttpResponse.BodyHandlers.ofInputStream());
            assertEquals(200, response.statusCode());
            BufferedReader reader = new BufferedReader(new InputStreamReader(response.body(), StandardCharsets.UTF_8));
            String first = reader.readLine();
            assertTrue(first.startsWith("data: "), first); // the stream is under way
            streams.add(reader);
        }
        served.process().destroy(); // SIGTERM
        for (BufferedReader reader : streams) {
            int chunks = 1;
            String line;
            String last = null;
            while ((line = reader.readLine()) != null) {
                if (line.startsWith("data: ")) {
                    chunks++;
                    last = line;
                }
            }
            assertEquals("data: [DONE]", last, "a stream was cut\n" + Files.readString(served.log()));
            assertEquals(tokens + 2, chunks); // every token, the finish chunk, [DONE]
        }
        assertTrue(served.process().waitFor(60, TimeUnit.SECONDS), "serve stops after the streams");
        assertEquals(0, served.process().exitValue(), Files.readString(served.log()));
        assertTrue(Files.readString(served.log()).contains("finishing the requests in flight"));
    }
}
