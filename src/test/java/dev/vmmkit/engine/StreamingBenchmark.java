package dev.vmmkit.engine;

import java.io.BufferedReader;
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
import java.util.Collections;
import java.util.List;

/**
 * Time to first token and tokens/s as a client sees them, streamed against non-streamed, on the
 * tiny GGUF model (the llama engine, where llama.cpp was fetched) or else the echo engine, in
 * process and with a worker. Run by scripts/bench-engine.sh; prints numbers, asserts nothing.
 * Non-streamed, the first token reaches the client with the last one.
 */
public final class StreamingBenchmark {
    private static final HttpClient CLIENT = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

    public static void main(String[] args) throws Exception {
        int runs = args.length > 0 ? Integer.parseInt(args[0]) : 20;
        int maxTokens = args.length > 1 ? Integer.parseInt(args[1]) : 64;
        Path llama = Path.of("target", "engines", "llama", "cpu").toAbsolutePath();
        Path root = Files.createTempDirectory("vmmkit-stream-bench");
        Path tiny = root.resolve("tiny.gguf");
        boolean onLlama = Files.isRegularFile(llama.resolve("libllama_engine.so"))
                && new ProcessBuilder("bash", "scripts/tiny-gguf.sh", tiny.toString()).inheritIO().start().waitFor() == 0;
        for (Isolation isolation : Isolation.values()) {
            try (EngineTestBed bed = new EngineTestBed(root.resolve(isolation.name()))) {
                if (onLlama) {
                    Path dir = Files.createDirectories(bed.engines.resolve("llama/cpu"));
                    Files.copy(llama.resolve("libllama_engine.so"), dir.resolve("libllama_engine.so"));
                    Files.writeString(dir.resolve("manifest.json"), Files.readString(llama.resolve("manifest.json"))
                            .replace("\"options\": {", "\"options\": {\"threads\": 1, "));
                    Files.copy(tiny, bed.models.resolve("m.gguf"));
                } else {
                    Path dir = Files.createDirectories(bed.engines.resolve("echo/cpu"));
                    Files.copy(EngineTestBed.FIXTURES.resolve("echo/cpu/libecho_engine.so"), dir.resolve("libecho_engine.so"));
                    Files.copy(Path.of("examples/echo-engine/manifest-cpu.json"), dir.resolve("manifest.json"));
                    bed.model("m.bin", 1 << 20);
                }
                if (isolation == Isolation.WORKER) bed.workers(EngineHost.Settings.DEFAULT_REQUEST_TIMEOUT);
                bed.start();
                String base = "http://127.0.0.1:" + bed.port() + "/v1/completions";
                String body = "{\"model\":\"m\",\"prompt\":\"once upon a time\",\"max_tokens\":" + maxTokens + ",\"seed\":1";
                for (int i = 0; i < 3; i++) whole(base, body + "}"); // load and warm up
                List<double[]> streamed = new ArrayList<>();
                List<double[]> nonStreamed = new ArrayList<>();
                for (int i = 0; i < runs; i++) {
                    nonStreamed.add(whole(base, body + "}"));
                    streamed.add(stream(base, body + ",\"stream\":true,\"stream_options\":{\"include_usage\":true}}"));
                }
                String engine = onLlama ? "llama tiny.gguf" : "echo";
                report(engine, isolation, "non-streamed", nonStreamed);
                report(engine, isolation, "streamed", streamed);
            }
        }
    }

    /** {first token ms, total ms, tokens}. */
    private static double[] whole(String url, String body) throws Exception {
        long start = System.nanoTime();
        HttpResponse<String> answer = CLIENT.send(HttpRequest.newBuilder(URI.create(url)).POST(HttpRequest.BodyPublishers.ofString(body))
                .timeout(Duration.ofMinutes(2)).build(), HttpResponse.BodyHandlers.ofString());
        double ms = (System.nanoTime() - start) / 1e6;
        int tokens = EngineTestBed.JSON.readTree(answer.body()).path("usage").path("completion_tokens").asInt();
        return new double[]{ms, ms, tokens};
    }

    private static double[] stream(String url, String body) throws Exception {
        long start = System.nanoTime();
        HttpResponse<InputStream> answer = CLIENT.send(HttpRequest.newBuilder(URI.create(url)).POST(HttpRequest.BodyPublishers.ofString(body))
                .timeout(Duration.ofMinutes(2)).build(), HttpResponse.BodyHandlers.ofInputStream());
        double first = -1;
        int tokens = 0; // from the usage event: a chunk may hold several tokens (a character split across them)
        try (BufferedReader reader = new BufferedReader(new InputStreamReader(answer.body(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = reader.readLine()) != null) {
                if (!line.startsWith("data: {")) continue;
                var event = EngineTestBed.JSON.readTree(line.substring(6));
                if (event.has("usage")) tokens = event.path("usage").path("completion_tokens").asInt();
                else if (first < 0 && event.path("choices").path(0).path("finish_reason").isNull()) first = (System.nanoTime() - start) / 1e6;
            }
        }
        return new double[]{first, (System.nanoTime() - start) / 1e6, tokens};
    }

    private static void report(String engine, Isolation isolation, String mode, List<double[]> runs) {
        List<Double> first = new ArrayList<>();
        List<Double> rate = new ArrayList<>();
        for (double[] run : runs) {
            first.add(run[0]);
            rate.add(run[2] / (run[1] / 1000));
        }
        Collections.sort(first);
        Collections.sort(rate);
        System.out.printf("stream-bench %s %-10s %-12s time to first token p50 %8.2f ms   tokens/s p50 %9.1f   (%d runs, %.0f tokens each)%n",
                engine, isolation.name().toLowerCase(), mode, first.get(first.size() / 2), rate.get(rate.size() / 2), runs.size(), runs.get(0)[2]);
    }
}
