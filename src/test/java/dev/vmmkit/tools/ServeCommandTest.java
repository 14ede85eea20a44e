package dev.vmmkit.tools;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** {@code vmmkit serve} as a process: --port 0, the ready line, a generate, a clean stop. */
class ServeCommandTest {
    private static final Path ECHO = Path.of("target", "test-native", "engines", "echo", "cpu").toAbsolutePath();

    @Test
    void servesTheExampleEngineOnAFreePort(@TempDir Path root) throws Exception {
        Path plugin = Files.createDirectories(root.resolve("engines/echo/cpu"));
        Files.copy(ECHO.resolve("libecho_engine.so"), plugin.resolve("libecho_engine.so"));
        Files.copy(Path.of("examples/echo-engine/manifest-cpu.json"), plugin.resolve("manifest.json"));
        Path models = Files.createDirectories(root.resolve("models"));
        Files.write(models.resolve("tiny.bin"), new byte[3 << 20]);

        Process serve = new ProcessBuilder(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"),
                VmmkitCli.class.getName(), "serve", "--engines", root.resolve("engines").toString(),
                "--models", models.toString(), "--port", "0", "--driver", "host", "--device-memory", "64MiB",
                "--poll-interval", "100ms"))
                .redirectError(root.resolve("serve.log").toFile())
                .start();
        try {
            BufferedReader out = new BufferedReader(new InputStreamReader(serve.getInputStream(), StandardCharsets.UTF_8));
            String ready = out.readLine();
            assertTrue(ready != null && ready.matches("listening on http://127\\.0\\.0\\.1:\\d+"),
                    ready + "\n" + Files.readString(root.resolve("serve.log")));
            String base = ready.substring("listening on ".length());
            HttpClient client = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
            HttpResponse<String> answer = client.send(HttpRequest.newBuilder(URI.create(base + "/api/generate"))
                    .POST(HttpRequest.BodyPublishers.ofString("{\"model\":\"tiny\",\"prompt\":\"hello\"}")).build(),
                    HttpResponse.BodyHandlers.ofString());
            assertEquals(200, answer.statusCode(), answer.body());
            assertTrue(answer.body().contains("\"engine\":\"echo\""), answer.body());
            HttpResponse<String> metrics = client.send(HttpRequest.newBuilder(URI.create(base + "/metrics")).build(),
                    HttpResponse.BodyHandlers.ofString());
            assertTrue(metrics.body().contains("vmmkit_device_total_bytes 67108864"), metrics.body());
        } finally {
            serve.destroy(); // SIGTERM: the shutdown hook unloads the models
            assertTrue(serve.waitFor(30, TimeUnit.SECONDS), "serve stops on SIGTERM");
        }
    }

    @Test
    void pollIntervalsAreReadInSecondsOrMilliseconds() {
        assertEquals(Duration.ofSeconds(1), ServeCommand.parseDuration("1s", "--poll-interval"));
        assertEquals(Duration.ofMillis(250), ServeCommand.parseDuration("250ms", "--poll-interval"));
        assertEquals(Duration.ofMillis(2500), ServeCommand.parseDuration("2.5", "--poll-interval"));
        assertThrows(IllegalArgumentException.class, () -> ServeCommand.parseDuration("soon", "--poll-interval"));
    }

    @Test
    void missingDirectoriesAreAClearError(@TempDir Path root) {
        int code = VmmkitCli.run("serve", "--engines", root.resolve("none").toString(), "--models", root.toString(),
                "--driver", "host", "--port", "0");
        assertEquals(VmmkitCli.EXIT_ERROR, code);
    }
}
