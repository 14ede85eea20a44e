package dev.vmmkit.tools.run;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

/**
 * Real processes: {@code vmmkit run} (a JVM of its own, as users start it) runs a shell script that
 * records its pid, then waits. The test signals the launcher, as a terminal, a job control system
 * or {@code kill} would, and checks that the program got the signal, that the launcher waited for
 * it and exited with its status, and that no program is left running.
 */
class SignalForwardingTest {
    @TempDir
    Path dir;

    @ParameterizedTest(name = "SIG{0}: {1}")
    @CsvSource({
            "TERM, trapped",
            "INT, trapped",
            "HUP, trapped",
            "TERM, default",
            "INT, default",
    })
    void aSignalToTheLauncherGoesToTheProgramAndItsStatusComesBack(String signal, String disposition) throws Exception {
        assumeFalse(SignalForwarding.isIgnored(SignalForwarding.ignoredSignals(), signalNumber(signal)),
                "SIG" + signal + " is ignored in this process (started under nohup, or in the background of a shell "
                        + "without job control?), so by the launcher and the program too; nohupIsKept covers that case");
        Path pidFile = dir.resolve("pid");
        Path gotFile = dir.resolve("got");
        // Trapped: the program cleans up and exits 40. Default: the signal ends it (status 128 + N).
        String trap = disposition.equals("trapped") ? "trap 'echo " + signal + " > " + gotFile + "; exit 40' " + signal + "; " : "";
        // (bash itself ignores a SIGINT aimed at it alone while it waits for a command: exec one.)
        String waiting = trap.isEmpty() ? "exec sleep 600" : "while true; do sleep 0.05; done";
        String script = trap + "echo $$ > " + pidFile + ".tmp; mv " + pidFile + ".tmp " + pidFile + "; " + waiting;
        Process launcher = launch("bash", "-c", script);
        long programPid = awaitPid(pidFile, launcher);
        try {
            new ProcessBuilder("kill", "-" + signal, Long.toString(launcher.pid())).start().waitFor();
            assertTrue(launcher.waitFor(30, TimeUnit.SECONDS), () -> "the launcher did not exit; program "
                    + (ProcessHandle.of(programPid).map(ProcessHandle::isAlive).orElse(false) ? "still running" : "gone")
                    + "; its output:\n" + output(launcher));

            int expected = disposition.equals("trapped") ? 40 : 128 + signalNumber(signal);
            assertEquals(expected, launcher.exitValue(), () -> output(launcher));
            if (disposition.equals("trapped")) assertEquals(signal, Files.readString(gotFile).strip());
            assertFalse(ProcessHandle.of(programPid).map(ProcessHandle::isAlive).orElse(false),
                    "the program outlived the launcher");
        } finally {
            // Whatever failed, leave nothing running.
            launcher.destroyForcibly();
            ProcessHandle.of(programPid).ifPresent(ProcessHandle::destroyForcibly);
        }
    }

    /** Under nohup the launcher and the program ignore SIGHUP; SIGTERM still goes through. */
    @Test
    void nohupIsKept() throws Exception {
        Path pidFile = dir.resolve("pid");
        String script = "echo $$ > " + pidFile + ".tmp; mv " + pidFile + ".tmp " + pidFile + "; exec sleep 600";
        Process launcher = launch(List.of("nohup"), "bash", "-c", script);
        long programPid = awaitPid(pidFile, launcher);
        try {
            new ProcessBuilder("kill", "-HUP", Long.toString(launcher.pid())).start().waitFor();
            assertFalse(launcher.waitFor(1, TimeUnit.SECONDS), () -> "SIGHUP ended the launcher under nohup: " + output(launcher));
            assertTrue(ProcessHandle.of(programPid).map(ProcessHandle::isAlive).orElse(false), "SIGHUP reached the program");
            new ProcessBuilder("kill", "-TERM", Long.toString(launcher.pid())).start().waitFor();
            assertTrue(launcher.waitFor(30, TimeUnit.SECONDS), () -> "the launcher did not exit: " + output(launcher));
            assertEquals(128 + signalNumber("TERM"), launcher.exitValue(), () -> output(launcher));
        } finally {
            launcher.destroyForcibly();
            ProcessHandle.of(programPid).ifPresent(ProcessHandle::destroyForcibly);
        }
    }

    private Process launch(String... program) throws IOException {
        return launch(List.of(), program);
    }

    /** Starts {@code vmmkit run -- program}, behind {@code wrapper} (e.g. nohup) when it is not empty. */
    private Process launch(List<String> wrapper, String... program) throws IOException {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<String> command = new java.util.ArrayList<>(wrapper);
        command.addAll(List.of(java, "--enable-native-access=ALL-UNNAMED",
                "-cp", System.getProperty("java.class.path"), "dev.vmmkit.tools.VmmkitCli", "run", "--"));
        command.addAll(List.of(program));
        return new ProcessBuilder(command)
                .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
                .redirectErrorStream(true)
                .redirectOutput(dir.resolve("output.txt").toFile())
                .start();
    }

    private static long awaitPid(Path pidFile, Process launcher) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!Files.exists(pidFile)) {
            if (!launcher.isAlive() || System.nanoTime() > deadline) {
                launcher.destroyForcibly();
                throw new AssertionError("the program did not start");
            }
            Thread.sleep(20);
        }
        return Long.parseLong(Files.readString(pidFile).strip());
    }

    private String output(Process launcher) {
        try {
            return Files.readString(dir.resolve("output.txt"));
        } catch (IOException e) {
            return e.toString();
        }
    }

    private static int signalNumber(String name) {
        return switch (name) {
            case "HUP" -> 1;
            case "INT" -> 2;
            case "TERM" -> 15;
            default -> throw new IllegalArgumentException(name);
        };
    }
}
