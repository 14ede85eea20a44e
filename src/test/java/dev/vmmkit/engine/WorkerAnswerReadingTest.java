package dev.vmmkit.engine;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Who reads a worker's answers ({@link WorkerProcess}): a caller may read its own, and then leaves.
 * An answer that comes after that caller left is still read (the watcher takes the channel over),
 * and a call whose caller reads is still ended at its timeout. The workers are shell scripts that
 * write frames by hand; FIFOs order the steps ({@link EngineHooks}).
 */
class WorkerAnswerReadingTest {
    /** A READY frame: length 13, type 64, call 0, pid 1. */
    private static final String READY = "\\000\\000\\000\\015\\100\\000\\000\\000\\000\\000\\000\\000\\000\\000\\000\\000\\001";
    /** DONE frames with no payload: length 5, type 65, call 1 or 2. */
    private static final String DONE_1 = "\\000\\000\\000\\005\\101\\000\\000\\000\\001";
    private static final String DONE_2 = "\\000\\000\\000\\005\\101\\000\\000\\000\\002";
    /** A GENERATE frame with the prompt "x": 4 + 1 + 4 + 4 + 1 bytes. */
    private static final int GENERATE_X_BYTES = 14;
    private static final Duration LONG = Duration.ofSeconds(300);

    @Test
    void anAnswerThatComesAfterTheReadingCallerLeftIsStillRead(@TempDir Path dir) throws Exception {
        try (EngineHooks hooks = EngineHooks.open(dir, "b")) {
            // reads call 1, says so, reads call 2, answers call 1, waits for the release, answers call 2
            String script = "printf '" + READY + "'; head -c " + GENERATE_X_BYTES + " >/dev/null; printf x > " + dir.resolve("b.entered")
                    + "; head -c " + GENERATE_X_BYTES + " >/dev/null; printf '" + DONE_1 + "'; head -c 1 " + dir.resolve("b.release")
                    + " >/dev/null; printf '" + DONE_2 + "'; exec sleep 1000";
            WorkerProcess worker = WorkerProcess.start(List.of("sh", "-c", script), "test [m]", dir.resolve("hs_err.log"), LONG, death -> { });
            // a thread per call: a caller may block reading the channel
            ExecutorService callers = Executors.newCachedThreadPool();
            try {
                CompletableFuture<WorkerProcess.Answer> first = CompletableFuture.supplyAsync(() -> call(worker), callers);
                hooks.awaitEntered(); // call 1 is out
                CompletableFuture<WorkerProcess.Answer> second = CompletableFuture.supplyAsync(() -> call(worker), callers);
                assertEquals(WorkerChannel.DONE, first.join().type());
                assertFalse(second.isDone(), "call 2 is answered only after the release");
                hooks.release();
                assertEquals(WorkerChannel.DONE, second.join().type());
                assertTrue(worker.alive());
            } finally {
                worker.kill("test over");
                callers.shutdown();
            }
        }
    }

    @Test
    void aCallThatOutrunsItsTimeoutEndsTheWorkerWhoeverReads(@TempDir Path dir) throws Exception {
        CompletableFuture<WorkerProcess.Death> death = new CompletableFuture<>();
        // reads the call and never answers
        String script = "printf '" + READY + "'; head -c " + GENERATE_X_BYTES + " >/dev/null; exec sleep 1000";
        WorkerProcess worker = WorkerProcess.start(List.of("sh", "-c", script), "test [m]", dir.resolve("hs_err.log"), LONG, death::complete);
        WorkerProcess.WorkerDied died = assertThrows(WorkerProcess.WorkerDied.class, () -> worker.call(WorkerChannel.GENERATE,
                "engine_generate", out -> WorkerChannel.writeString(out, "x"), Duration.ofSeconds(2)));
        assertTrue(died.death.timedOut(), died.getMessage());
        assertTrue(died.getMessage().contains("engine_generate ran longer than the request timeout of 2000 ms"), died.getMessage());
        assertEquals(died.death, death.join());
        assertFalse(ProcessHandle.of(worker.pid()).map(ProcessHandle::isAlive).orElse(false));
    }

    private static WorkerProcess.Answer call(WorkerProcess worker) {
        try {
            return worker.call(WorkerChannel.GENERATE, "engine_generate", out -> WorkerChannel.writeString(out, "x"), LONG);
        } catch (WorkerProcess.WorkerDied e) {
            throw new IllegalStateException(e);
        }
    }
}
