package dev.vmmkit.engine;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Workers that break the channel instead of crashing: garbage before or after the first frame, a
 * channel closed by a worker that keeps running, an exit between calls. Each is handled like a
 * crash: the call fails naming what happened, and the process is gone. The workers here are shell
 * scripts that write the frames by hand.
 */
class WorkerChannelFaultTest {
    /** A READY frame: length 13, type 64, call 0, pid 1. */
    private static final String READY = "\\000\\000\\000\\015\\100\\000\\000\\000\\000\\000\\000\\000\\000\\000\\000\\000\\001";
    private static final Duration LONG = Duration.ofSeconds(300);

    @Test
    void garbageInsteadOfTheFirstFrame(@TempDir Path dir) {
        CompletableFuture<WorkerProcess.Death> death = new CompletableFuture<>();
        WorkerProcess.WorkerDied died = assertThrows(WorkerProcess.WorkerDied.class,
                () -> start(dir, "printf '\\377\\377\\377\\377'; exec sleep 1000", death));
        assertTrue(died.getMessage().contains("wrote garbage on its channel"), died.getMessage());
        assertEquals(died.death, death.join());
    }

    @Test
    void garbageAsTheAnswerToACall(@TempDir Path dir) throws Exception {
        CompletableFuture<WorkerProcess.Death> death = new CompletableFuture<>();
        WorkerProcess worker = start(dir, "printf '" + READY + "'; head -c 1 >/dev/null; printf 'junkjunkjunk'; exec sleep 1000", death);
        WorkerProcess.WorkerDied died = assertThrows(WorkerProcess.WorkerDied.class,
                () -> worker.call(WorkerChannel.GENERATE, "engine_generate", out -> WorkerChannel.writeString(out, "x"), LONG));
        assertTrue(died.getMessage().contains("wrote garbage on its channel"), died.getMessage());
        assertFalse(worker.alive());
        assertFalse(ProcessHandle.of(worker.pid()).map(ProcessHandle::isAlive).orElse(false));
    }

    @Test
    void aChannelClosedByAWorkerThatKeepsRunning(@TempDir Path dir) throws Exception {
        CompletableFuture<WorkerProcess.Death> death = new CompletableFuture<>();
        WorkerProcess worker = start(dir, "printf '" + READY + "'; exec 1>&-; exec sleep 1000", death);
        assertTrue(death.join().cause().contains("closed its channel without exiting"), death.join().cause());
        WorkerProcess.WorkerDied died = assertThrows(WorkerProcess.WorkerDied.class,
                () -> worker.call(WorkerChannel.GENERATE, "engine_generate", out -> WorkerChannel.writeString(out, "x"), LONG));
        assertTrue(died.getMessage().contains("closed its channel"), died.getMessage());
        assertFalse(worker.alive());
        assertFalse(ProcessHandle.of(worker.pid()).map(ProcessHandle::isAlive).orElse(false));
    }

    @Test
    void anExitBetweenCallsIsNamedByItsStatus(@TempDir Path dir) throws Exception {
        CompletableFuture<WorkerProcess.Death> death = new CompletableFuture<>();
        WorkerProcess worker = start(dir, "printf '" + READY + "'; head -c 1 >/dev/null; exit 7", death);
        WorkerProcess.WorkerDied died = assertThrows(WorkerProcess.WorkerDied.class,
                () -> worker.call(WorkerChannel.GENERATE, "engine_generate", out -> WorkerChannel.writeString(out, "x"), LONG));
        assertTrue(died.getMessage().contains("exited with status 7"), died.getMessage());
    }

    @Test
    void exitStatusesAndSignalsInWords() {
        assertEquals("exited with status 3", WorkerDeathCause.describe(3));
        assertEquals("was killed by signal 11 (SIGSEGV)", WorkerDeathCause.describe(128 + 11));
        assertEquals("was killed by signal 9 (SIGKILL)", WorkerDeathCause.describe(128 + 9));
    }

    private static WorkerProcess start(Path dir, String script, CompletableFuture<WorkerProcess.Death> death) throws Exception {
        return WorkerProcess.start(List.of("sh", "-c", script), "test [m]", dir.resolve("hs_err.log"), LONG, death::complete);
    }
}
