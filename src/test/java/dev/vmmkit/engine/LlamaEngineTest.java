package dev.vmmkit.engine;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The llama.cpp engine (examples/llama-engine) serving GGUF models that scripts/tiny-gguf.sh
 * writes with llama.cpp's own gguf writer, over real HTTP: real loading and decoding code, on the
 * host emulation. Skipped, saying why, where llama.cpp could not be fetched from the npm registry
 * or the gguf writer cannot run.
 */
class LlamaEngineTest {
    static final Path PLUGIN = Path.of("target", "engines", "llama", "cpu").toAbsolutePath();
    private static final int MIB = 1 << 20;
    /** The tiny model's end-of-sequence token (scripts/tiny_gguf.py: &lt;unk&gt; &lt;s&gt; &lt;/s&gt;). */
    private static final long END = 2;
    private static Path tiny;
    private static Path wide;

    @BeforeAll
    static void models(@TempDir Path dir) throws Exception {
        assumeTrue(Files.isRegularFile(PLUGIN.resolve("libllama_engine.so")),
                "llama.cpp was not fetched, so the llama engine was not built (scripts/install-test-deps.sh, run by "
                        + "./vmmkit test, runs scripts/fetch-llama-cpp.sh: it needs npm and the npm registry)");
        tiny = write(dir.resolve("tiny.gguf"));
        // Wider layers: about 5 MiB of weights, so two models are told apart in device memory.
        wide = write(dir.resolve("wide.gguf"), "--embd", "256", "--ff", "512", "--vocab", "1024");
    }

    static Path write(Path out, String... dims) throws Exception {
        List<String> command = new ArrayList<>(List.of("bash", "scripts/tiny-gguf.sh", out.toString()));
        command.addAll(List.of(dims));
        Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        String said = new String(process.getInputStream().readAllBytes());
        assertTrue(process.waitFor(120, TimeUnit.SECONDS), "tiny-gguf.sh did not finish");
        assumeTrue(process.exitValue() != 3, "scripts/tiny-gguf.sh cannot run here: " + said.strip());
        assertEquals(0, process.exitValue(), said);
        return out;
    }

    /**
     * Installs the built plugin with these options (JSON members, or "") and the given models. One
     * thread: ggml's threads wait for each other by spinning, which a loaded 2-core machine punishes.
     */
    private static EngineTestBed bed(Path root, String options, String... models) throws IOException {
        EngineTestBed bed = new EngineTestBed(root);
        Path dir = Files.createDirectories(bed.engines.resolve("llama/cpu"));
        Files.copy(PLUGIN.resolve("libllama_engine.so"), dir.resolve("libllama_engine.so"));
        EngineTestBed.writeManifest(dir, manifest(options));
        for (String model : models) {
            Files.copy(model.startsWith("wide") ? wide : tiny, bed.models.resolve(model + ".gguf"));
        }
        return bed;
    }

    private static String manifest(String options) {
        return "{\"id\":\"llama\",\"version\":\"3.22.1\",\"abi_version\":\"2\",\"gpu_backend\":\"cpu\",\"architectures\":[\"llama\"],"
                + "\"formats\":[\"gguf\"],\"binary\":\"libllama_engine.so\",\"options\":{\"threads\":1" + options + "}}";
    }

    private static List<Long> ids(EngineTestBed.Answer answer) {
        assertEquals(200, answer.status(), answer.text());
        List<Long> ids = new ArrayList<>();
        for (JsonNode token : answer.json().get("tokens")) ids.add(token.get("id").asLong());
        return ids;
    }

    @Test
    void servesRealTokensWithTopLogprobsTheSameForTheSamePrompt(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = bed(root, "", "tiny")) {
            bed.start();
            EngineTestBed.Answer answer = bed.generate("tiny", "hello world");
            List<Long> first = ids(answer);
            assertEquals("llama", answer.json().get("engine").asText());
            assertTrue(first.size() == 32 || first.getLast() == END, "32 tokens by default, fewer only after the end token: " + first);
            for (JsonNode token : answer.json().get("tokens")) {
                assertTrue(token.get("id").asLong() < 512, "an id of the tiny model's vocabulary");
                JsonNode logprobs = token.get("logprobs");
                assertEquals(5, logprobs.size(), "top-5 by default");
                double total = 0;
                for (int i = 0; i < logprobs.size(); i++) {
                    double p = logprobs.get(i).asDouble();
                    assertTrue(p <= 0, "a log-probability");
                    if (i > 0) assertTrue(p <= logprobs.get(i - 1).asDouble(), "largest first");
                    total += Math.exp(p);
                }
                assertTrue(total <= 1.0 + 1e-5, "five probabilities of one distribution: " + total);
            }
            assertEquals(first, ids(bed.generate("tiny", "hello world")), "the same prompt gives the same tokens");
            assertNotEquals(first, ids(bed.generate("tiny", "a different prompt")), "the prompt steers the model");
            long held = bed.loadedModel("tiny").get("device_bytes").asLong();
            assertTrue(held >= 500_000, "the weights live in vmmkit's memory: " + held);
            assertEquals(held, bed.metric("vmmkit_model_device_bytes{model=\"tiny\",engine=\"llama\",version=\"3.22.1\"}"));
        }
    }

    @Test
    void theSamePromptAgainReusesItsDecodeAndGivesTheSameTokensAndLogprobs(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = bed(root, "", "tiny")) {
            bed.start();
            JsonNode first = bed.generate("tiny", "hello world").json().get("tokens");
            assertEquals(first, bed.generate("tiny", "hello world").json().get("tokens"),
                    "at once again (its prompt kept): the same tokens and log-probabilities");
            JsonNode other = bed.generate("tiny", "hello world, and more").json().get("tokens");
            assertNotEquals(first, other, "a longer prompt is not answered from the kept one");
            assertEquals(first, bed.generate("tiny", "hello world").json().get("tokens"),
                    "after another prompt (decoded afresh): the same again");
            assertEquals(other, bed.generate("tiny", "hello world, and more").json().get("tokens"),
                    "the longer prompt, kept in turn");
        }
    }

    @Test
    void theWholeDistributionIsTheLogSoftmaxAndGreedyTakesItsLargest(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = bed(root, ",\"top_k\":0,\"max_tokens\":6", "tiny")) {
            bed.start();
            EngineTestBed.Answer answer = bed.generate("tiny", "abc");
            assertEquals(6, ids(answer).size(), "max_tokens from the options");
            for (JsonNode token : answer.json().get("tokens")) {
                JsonNode logprobs = token.get("logprobs");
                assertEquals(512, logprobs.size(), "top_k 0: every token of the vocabulary, by id");
                double total = 0;
                int largest = 0;
                for (int i = 0; i < logprobs.size(); i++) {
                    total += Math.exp(logprobs.get(i).asDouble());
                    if (logprobs.get(i).asDouble() > logprobs.get(largest).asDouble()) largest = i;
                }
                assertEquals(1.0, total, 1e-4, "a distribution");
                assertEquals(largest, token.get("id").asInt(), "greedy decoding picks the most likely token");
            }
        }
    }

    @Test
    void theTokensAndLogprobsAreThoseOfAnIndependentNumpyForwardPass(@TempDir Path root) throws Exception {
        // src/test/python/llama_reference.py: llama's arithmetic written out in numpy over the same
        // file, from the prompt BOS + "▁a" (how SentencePiece tokenizes "a" with this vocabulary).
        Process process = new ProcessBuilder("bash", "scripts/gguf-python.sh", "src/test/python/llama_reference.py",
                tiny.toString(), "8", "\u2581a").redirectError(ProcessBuilder.Redirect.DISCARD).start();
        String said = new String(process.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
        assertTrue(process.waitFor(120, TimeUnit.SECONDS), "the reference did not finish");
        assertEquals(0, process.exitValue(), said);
        JsonNode reference = EngineTestBed.JSON.readTree(said);
        try (EngineTestBed bed = bed(root, ",\"top_k\":0,\"max_tokens\":8", "tiny")) {
            bed.start();
            EngineTestBed.Answer answer = bed.generate("tiny", "a");
            List<Long> expected = new ArrayList<>();
            for (JsonNode id : reference.get("ids")) expected.add(id.asLong());
            assertEquals(expected, ids(answer), "greedy tokens as the reference computes them");
            // ggml rounds to f16 where numpy does not (queries meeting the f16 keys, attention
            // accumulators): the log-probabilities agree to within a few 1e-3 where they span 20 units.
            double largest = 0;
            for (int t = 0; t < expected.size(); t++) {
                JsonNode served = answer.json().get("tokens").get(t).get("logprobs");
                JsonNode wanted = reference.get("logprobs").get(t);
                assertEquals(wanted.size(), served.size());
                for (int i = 0; i < wanted.size(); i++) {
                    double difference = Math.abs(wanted.get(i).asDouble() - served.get(i).asDouble());
                    assertTrue(difference < 2.5e-2, "token " + t + ", logprob of id " + i + " differs by " + difference);
                    largest = Math.max(largest, difference);
                }
            }
            System.out.println("largest difference from the numpy reference: " + largest);
        }
    }

    @Test
    void samplingWithATemperatureIsSeededSoItRepeats(@TempDir Path root) throws Exception {
        List<Long> greedy;
        try (EngineTestBed bed = bed(root.resolve("greedy"), "", "tiny")) {
            bed.start();
            greedy = ids(bed.generate("tiny", "hello"));
        }
        try (EngineTestBed bed = bed(root.resolve("sampled"), ",\"temperature\":1.5,\"seed\":7", "tiny")) {
            bed.start();
            List<Long> sampled = ids(bed.generate("tiny", "hello"));
            assertEquals(sampled, ids(bed.generate("tiny", "hello")), "the same seed, the same tokens");
            assertNotEquals(greedy, sampled, "a temperature of 1.5 leaves the greedy path");
        }
    }

    /** vmmkit's tokens of a /v1/completions answer for "hello" with these request fields (JSON members). */
    private static JsonNode sampled(EngineTestBed bed, String fields) {
        EngineTestBed.Answer answer = bed.post("/v1/completions", "{\"model\":\"tiny\",\"prompt\":\"hello\",\"max_tokens\":16" + fields + "}");
        assertEquals(200, answer.status(), answer.text());
        return answer.json().get("vmmkit").get("tokens");
    }

    private static List<Long> sampledIds(EngineTestBed bed, String fields) {
        List<Long> ids = new ArrayList<>();
        for (JsonNode token : sampled(bed, fields)) ids.add(token.get("id").asLong());
        return ids;
    }

    @Test
    void topPOfOneIsNoTopPAndTheSameSeedRepeats(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = bed(root, "", "tiny")) {
            bed.start();
            List<Long> whole = sampledIds(bed, ",\"temperature\":1.5,\"seed\":7");
            assertEquals(whole, sampledIds(bed, ",\"temperature\":1.5,\"seed\":7,\"top_p\":1"), "top_p 1 keeps every token");
            List<Long> nucleus = sampledIds(bed, ",\"temperature\":1.5,\"seed\":7,\"top_p\":0.5");
            assertEquals(nucleus, sampledIds(bed, ",\"temperature\":1.5,\"seed\":7,\"top_p\":0.5"), "the same seed, the same tokens");
            assertNotEquals(nucleus, sampledIds(bed, ",\"temperature\":1.5,\"seed\":8,\"top_p\":0.5"), "another seed, other tokens");
        }
    }

    @Test
    void aTinyTopPLeavesOnlyTheMostLikelyTokenSoSamplingIsGreedy(@TempDir Path root) throws Exception {
        // The most likely token's probability is at least 1/512 (the vocabulary's size), far above
        // 1e-6: the nucleus is that one token, whatever the seed draws.
        try (EngineTestBed bed = bed(root, "", "tiny")) {
            bed.start();
            List<Long> greedy = sampledIds(bed, "");
            boolean leftGreedy = false;
            for (int seed = 1; seed <= 3; seed++) {
                assertEquals(greedy, sampledIds(bed, ",\"temperature\":1.5,\"top_p\":0.000001,\"seed\":" + seed), "seed " + seed);
                leftGreedy |= !greedy.equals(sampledIds(bed, ",\"temperature\":1.5,\"seed\":" + seed));
            }
            assertTrue(leftGreedy, "without top_p the same seeds leave the greedy path");
        }
    }

    @Test
    void everySampledTokenLiesInTheNucleus(@TempDir Path root) throws Exception {
        // top_k 0: each token carries the whole log-softmax, by id. At temperature t the sampling
        // distribution is p_i = exp(lp_i / t) / sum_j exp(lp_j / t); a token is in the nucleus of
        // top_p when the tokens more likely than it hold less than top_p of that distribution.
        double t = 1.5;
        double topP = 0.5;
        try (EngineTestBed bed = bed(root, ",\"top_k\":0", "tiny")) {
            bed.start();
            int notTheMostLikely = 0;
            for (int seed = 1; seed <= 3; seed++) {
                for (JsonNode token : sampled(bed, ",\"temperature\":" + t + ",\"top_p\":" + topP + ",\"seed\":" + seed)) {
                    JsonNode logprobs = token.get("logprobs");
                    double chosen = logprobs.get(token.get("id").asInt()).asDouble();
                    double total = 0;
                    double above = 0;
                    for (JsonNode lp : logprobs) {
                        double p = Math.exp(lp.asDouble() / t);
                        total += p;
                        if (lp.asDouble() > chosen) above += p;
                    }
                    assertTrue(above / total < topP + 1e-5, "token " + token.get("id") + " lies outside the nucleus: " + above / total);
                    if (above > 0) notTheMostLikely++;
                }
            }
            assertTrue(notTheMostLikely > 0, "the nucleus held more than the most likely token at some step");
        }
    }

    @Test
    void unloadGivesTheWeightsBackAndTheNextRequestLoadsAgain(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = bed(root, "", "tiny")) {
            bed.start();
            long before = bed.metric("vmmkit_device_used_bytes");
            List<Long> first = ids(bed.generate("tiny", "hello"));
            assertTrue(bed.metric("vmmkit_device_used_bytes") > before, "the weights are device memory");
            assertEquals(200, bed.delete("/api/models/tiny").status());
            assertNull(bed.loadedModel("tiny"));
            assertEquals(before, bed.metric("vmmkit_device_used_bytes"), "unload gives all of it back");
            assertEquals(first, ids(bed.generate("tiny", "hello")), "a new instance, the same tokens");
        }
    }

    @Test
    void theMonitorEvictsTheLeastRecentlyUsedModel(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = bed(root, ",\"max_tokens\":4", "wide_a", "wide_b")) {
            // 32 MiB device, 25 %: one wide model (about 5 MiB) fits under it, two do not.
            bed.start(32L * MIB, 0.25, 40, false, null);
            assertEquals(200, bed.generate("wide_a", "one").status());
            assertEquals(200, bed.generate("wide_b", "two").status());
            awaitGone(bed, "wide_a");
            assertNotNull(bed.loadedModel("wide_b"), "the most recently used model stays");
            assertTrue(bed.metric("vmmkit_evictions_total{reason=\"vram\"}") >= 1);
            assertEquals(200, bed.generate("wide_b", "two").status(), "the survivor keeps serving");
        }
    }

    @Test
    void aReloadUnderLoadFailsNoRequestAndKeepsTheTokens(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = bed(root, ",\"max_tokens\":8", "tiny")) {
            bed.start();
            List<Long> expected = ids(bed.generate("tiny", "hello"));
            int clients = 4;
            ConcurrentLinkedQueue<String> failures = new ConcurrentLinkedQueue<>();
            CountDownLatch beforeReload = new CountDownLatch(clients);
            CountDownLatch afterReload = new CountDownLatch(clients);
            AtomicBoolean reloaded = new AtomicBoolean();
            AtomicBoolean stop = new AtomicBoolean();
            List<Thread> threads = new ArrayList<>();
            for (int c = 0; c < clients; c++) {
                threads.add(Thread.ofPlatform().start(() -> {
                    boolean countedBefore = false;
                    boolean countedAfter = false;
                    while (!stop.get()) {
                        boolean sentAfterReload = reloaded.get();
                        EngineTestBed.Answer answer = bed.generate("tiny", "hello");
                        if (answer.status() != 200) failures.add(answer.status() + " " + answer.text());
                        else if (!ids(answer).equals(expected)) failures.add("other tokens: " + answer.text());
                        if (!countedBefore) {
                            beforeReload.countDown();
                            countedBefore = true;
                        }
                        if (sentAfterReload && !countedAfter) {
                            afterReload.countDown();
                            countedAfter = true;
                        }
                    }
                }));
            }
            assertTrue(beforeReload.await(60, TimeUnit.SECONDS), "every client was served before the reload");
            EngineTestBed.Answer reload = bed.post("/api/engines/llama/reload", "");
            assertEquals(200, reload.status(), reload.text());
            assertEquals(List.of("tiny"), List.of(reload.json().get("reloaded").get(0).get("models").get(0).asText()));
            reloaded.set(true);
            assertTrue(afterReload.await(60, TimeUnit.SECONDS), "every client was served by the new instance");
            stop.set(true);
            for (Thread thread : threads) thread.join();
            assertTrue(failures.isEmpty(), "failed requests: " + failures);
            assertEquals(1, bed.metric("vmmkit_reloads_total{result=\"ok\"}"));
        }
    }

    @Test
    void flashAttentionOnOrOffServesTheSameTokensAndAnUnknownWordIsRefusedByName(@TempDir Path root) throws Exception {
        optionKeepsTheTokensAndABadValueIsRefused(root, ",\"flash_attn\":\"off\"", ",\"flash_attn\": \"on\"",
                ",\"flash_attn\":\"fast\"", "\"flash_attn\" must be \"auto\", \"on\" or \"off\"");
    }

    @Test
    void theTimingOptionServesTheSameTokensAndABadValueIsRefusedByName(@TempDir Path root) throws Exception {
        optionKeepsTheTokensAndABadValueIsRefused(root, "", ",\"timing\": 1", ",\"timing\": 2",
                "option \"timing\" must be a whole number from 0 to 1");
    }

    /**
     * An option that changes how the engine computes, not what: the tokens under {@code changed}
     * are those under {@code baseline}; under {@code bad} the load fails with an answer that names
     * the option ({@code error}) and nothing stays loaded.
     */
    private void optionKeepsTheTokensAndABadValueIsRefused(Path root, String baseline, String changed, String bad, String error)
            throws Exception {
        List<Long> expected;
        try (EngineTestBed bed = bed(root.resolve("baseline"), baseline, "tiny")) {
            bed.start();
            expected = ids(bed.generate("tiny", "hello world"));
        }
        try (EngineTestBed bed = bed(root.resolve("changed"), changed, "tiny")) {
            bed.start();
            assertEquals(expected, ids(bed.generate("tiny", "hello world")), "the same tokens, computed or timed another way");
        }
        try (EngineTestBed bed = bed(root.resolve("bad"), bad, "tiny")) {
            bed.start();
            EngineTestBed.Answer answer = bed.generate("tiny", "hello world");
            assertEquals(500, answer.status(), answer.text());
            assertTrue(answer.error().contains(error), "the answer names the option: " + answer.error());
            assertNull(bed.loadedModel("tiny"));
        }
    }

    @Test
    void aCorruptModelIsRefusedSayingWhyAndTheHostKeepsServing(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = bed(root, "", "tiny")) {
            bed.start();
            List<Long> first = ids(bed.generate("tiny", "hello"));
            byte[] whole = Files.readAllBytes(tiny);
            Files.write(bed.models.resolve("cut.gguf"), java.util.Arrays.copyOf(whole, whole.length / 2));
            Files.write(bed.models.resolve("junk.gguf"), "GGUF but not really a model".getBytes());
            long before = bed.metric("vmmkit_device_used_bytes");
            EngineTestBed.Answer cut = bed.generate("cut", "hello");
            assertEquals(500, cut.status(), cut.text());
            assertTrue(cut.error().contains("engine_load_model") && cut.error().contains("not within the file bounds"),
                    "the answer says what is wrong with the file: " + cut.error());
            EngineTestBed.Answer junk = bed.generate("junk", "hello");
            assertEquals(500, junk.status(), junk.text());
            assertTrue(junk.error().contains("GGUF file is version"), "the answer says what is wrong: " + junk.error());
            assertNull(bed.loadedModel("cut"));
            assertEquals(before, bed.metric("vmmkit_device_used_bytes"), "a failed load leaves no memory behind");
            assertEquals(first, ids(bed.generate("tiny", "hello")), "the host keeps serving, the same tokens");
        }
    }

    private static void awaitGone(EngineTestBed bed, String name) throws InterruptedException {
        for (int i = 0; i < 2000; i++) {
            if (bed.loadedModel(name) == null) return;
            Thread.sleep(5);
        }
        fail(name + " was never evicted: " + bed.get("/api/models").text() + "\n" + bed.get("/metrics").text());
    }
}
