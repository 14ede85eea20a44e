package dev.vmmkit.interpose;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Under {@code vmmkit run}, the JVM starts when the program initialises CUDA (here its idiom,
 * {@code cudaFree(NULL)}), not at its first allocation, which used to wait the whole start (about
 * 200 ms on an H200): the shim reports itself ready while the program has not allocated yet.
 */
class EarlyStartTest {
    private static final Path ALLOC_TEST = Path.of("target", "test-native", "alloc_test").toAbsolutePath();
    /** A safety net against a hang, not an expectation: the JVM starts in well under a second. */
    private static final long WAIT_SECONDS = 90;

    @TempDir
    Path dir;

    private ProcessBuilder run(String scenario) {
        ProcessBuilder builder = new ProcessBuilder(VmmkitRunCommand.of("--driver", "host", "--", ALLOC_TEST.toString(), scenario));
        VmmkitRunCommand.isolate(builder.environment(), dir);
        builder.environment().put("VMM_LOG", "info");
        return builder;
    }

    @Test
    void theJvmIsUpBeforeTheProgramsFirstAllocation() throws Exception {
        Process process = run("early_start").redirectOutput(dir.resolve("stdout.txt").toFile()).start();
        CountDownLatch ready = new CountDownLatch(1);
        StringBuilder stderr = new StringBuilder();
        Thread reader = Thread.ofPlatform().start(() -> {
            try (BufferedReader lines = new BufferedReader(new InputStreamReader(process.getErrorStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = lines.readLine()) != null; ) {
                    synchronized (stderr) {
                        stderr.append(line).append('\n');
                    }
                    if (line.contains("vmm mode ready") && line.contains("started early")) ready.countDown();
                }
            } catch (IOException ignored) {
                // the process ended
            }
        });
        boolean upFirst = ready.await(WAIT_SECONDS, TimeUnit.SECONDS);
        try (OutputStream go = process.getOutputStream()) {
            go.write("go\n".getBytes(StandardCharsets.UTF_8)); // the program's first allocation comes now
        }
        assertTrue(process.waitFor(WAIT_SECONDS, TimeUnit.SECONDS), "the program did not end");
        reader.join();
        String out = Files.readString(dir.resolve("stdout.txt"));
        assertTrue(upFirst, "vmmkit did not report itself ready, started early, before the first allocation:\n" + stderr + out);
        assertEquals(0, process.exitValue(), () -> stderr + out);
        assertTrue(out.contains("initialised\nok early_start\n"), out);
    }

    @Test
    void aProgramThatEndsWhileTheJvmStartsEndsCleanly() throws Exception {
        for (int i = 0; i < 5; i++) runToItsEnd("init_only");
    }

    /**
     * Also the guard against a deadlock seen here once in about ten runs on a loaded host: the
     * program's first call resolved the real runtime with a dlopen inside dl_iterate_phdr's callback
     * while the JVM's start loaded libjvm on another thread (the loader's two locks taken in opposite
     * orders). Each run has that race; a hang fails the run.
     */
    @Test
    void aForkRightAfterCudasInitialisationLeavesBothSidesAllocating() throws Exception {
        for (int i = 0; i < 8; i++) runToItsEnd("fork_early");
    }

    /** Runs {@code scenario} to its end: it must end, with status 0, having passed. */
    private void runToItsEnd(String scenario) throws Exception {
        Process process = run(scenario).redirectOutput(dir.resolve("stdout.txt").toFile())
                .redirectError(dir.resolve("stderr.txt").toFile()).start();
        assertTrue(process.waitFor(WAIT_SECONDS, TimeUnit.SECONDS), scenario + ": the program did not end");
        assertEquals(0, process.exitValue(), () -> read("stderr.txt"));
        assertTrue(read("stdout.txt").contains("ok " + scenario + "\n"), () -> read("stderr.txt"));
    }

    private String read(String name) {
        try {
            return Files.readString(dir.resolve(name));
        } catch (IOException e) {
            return "(" + name + " unreadable: " + e + ")";
        }
    }
}
