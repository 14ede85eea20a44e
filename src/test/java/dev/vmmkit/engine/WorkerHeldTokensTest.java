package dev.vmmkit.engine;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A generation whose tokens nobody looks at before its end (a sink that is not live: an answer
 * given whole, with no stop string) gets its tokens from the worker together with the answer: the
 * same tokens as a live sink, in order, with the time the first was made, and a sink that says
 * stop still stops the engine. On the echo example (ABI version 2) in a worker.
 */
class WorkerHeldTokensTest {
    private static EngineTestBed bed(Path root) throws Exception {
        EngineTestBed bed = new EngineTestBed(root);
        Path echo = Files.createDirectories(bed.engines.resolve("echo").resolve("cpu"));
        Files.copy(EngineTestBed.FIXTURES.resolve("echo/cpu/libecho_engine.so"), echo.resolve("libecho_engine.so"));
        EngineTestBed.writeManifest(echo, Files.readString(Path.of("examples/echo-engine/manifest-cpu.json")));
        bed.model("tiny.bin", 4096);
        bed.workers(EngineHost.Settings.DEFAULT_REQUEST_TIMEOUT);
        return bed.start();
    }

    @Test
    void heldTokensAreTheLiveTokensAndSayWhenTheFirstWasMade(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = bed(root)) {
            List<Generation.Token> live = new ArrayList<>();
            List<Generation.Token> held = new ArrayList<>();
            Generation.Outcome liveOutcome;
            Generation.Outcome heldOutcome;
            long before;
            long after;
            try (ModelRegistry.Lease lease = bed.host().registry().acquire("tiny")) {
                assertTrue(lease.instance().workerPid() >= 0, "the model runs in a worker");
                liveOutcome = lease.instance().stream("hello", "{\"max_tokens\":5,\"top_logprobs\":2}", live::add);
                before = System.nanoTime();
                heldOutcome = lease.instance().stream("hello", "{\"max_tokens\":5,\"top_logprobs\":2}", Generation.Sink.atEnd(held::add));
                after = System.nanoTime();
            }
            assertEquals(5, live.size());
            assertEquals(live.size(), held.size());
            for (int i = 0; i < live.size(); i++) {
                assertEquals(live.get(i).id(), held.get(i).id());
                assertArrayEquals(live.get(i).text(), held.get(i).text());
                assertEquals(live.get(i).logprob(), held.get(i).logprob());
                assertArrayEquals(live.get(i).topIds(), held.get(i).topIds());
                assertArrayEquals(live.get(i).topLogprobs(), held.get(i).topLogprobs());
            }
            StringBuilder text = new StringBuilder();
            held.forEach(token -> text.append(new String(token.text(), StandardCharsets.UTF_8)));
            assertEquals("hello", text.toString());
            assertEquals(liveOutcome.finish(), heldOutcome.finish());
            assertEquals(liveOutcome.promptTokens(), heldOutcome.promptTokens());
            assertEquals(-1, liveOutcome.firstTokenAt(), "live tokens are timed as they arrive");
            assertTrue(heldOutcome.firstTokenAt() >= before && heldOutcome.firstTokenAt() <= after,
                    "the first held token was made during the call: " + before + " <= " + heldOutcome.firstTokenAt() + " <= " + after);
        }
    }

    @Test
    void aHeldGenerationStillStopsWhenItsSinkSaysStop(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = bed(root)) {
            long[] seen = {0};
            Generation.Outcome outcome;
            try (ModelRegistry.Lease lease = bed.host().registry().acquire("tiny")) {
                // a billion tokens: the call can only end because the sink said stop
                outcome = lease.instance().stream("abc", "{\"max_tokens\":1000000000}",
                        Generation.Sink.atEnd(token -> ++seen[0] < 3));
            }
            assertEquals(Generation.Finish.CANCELLED, outcome.finish());
            assertTrue(seen[0] >= 3 && seen[0] < 1_000_000_000L, "tokens seen " + seen[0]);
            // the worker goes on serving: the next call on the model
            EngineTestBed.Answer next = bed.post("/api/generate", "{\"model\":\"tiny\",\"prompt\":\"next\",\"stream\":false,\"options\":{\"num_predict\":4}}");
            assertEquals(200, next.status(), next.text());
            assertEquals("next", next.json().get("response").asText());
        }
    }

    @Test
    void aWholeAnswerOverHttpCountsItsFirstTokenWhenItWasMade(@TempDir Path root) throws Exception {
        try (EngineTestBed bed = bed(root)) {
            EngineTestBed.Answer answer = bed.post("/api/generate", "{\"model\":\"tiny\",\"prompt\":\"hello\",\"stream\":false,\"options\":{\"num_predict\":5}}");
            assertEquals(200, answer.status(), answer.text());
            assertEquals("hello", answer.json().get("response").asText());
            assertEquals(5, answer.json().get("tokens").size());
            // made before the end: the answer's eval_duration is the time from the first token to the end
            long total = answer.json().get("total_duration").asLong();
            long eval = answer.json().get("eval_duration").asLong();
            assertTrue(eval > 0 && eval < total, "eval " + eval + " of total " + total);
            assertEquals(1, bed.metric("vmmkit_time_to_first_token_seconds_count{model=\"tiny\"}"));
        }
    }
}
