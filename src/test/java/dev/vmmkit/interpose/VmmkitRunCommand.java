package dev.vmmkit.interpose;

import dev.vmmkit.ProcessResult;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * {@code vmmkit run ARGS} as a test starts it: a new JVM on the test's class path, as a user runs it;
 * and any program a test starts, in a clean environment, with its output kept in the test's folder.
 */
final class VmmkitRunCommand {
    private VmmkitRunCommand() {
    }

    static List<String> of(String... args) {
        List<String> command = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"),
                "dev.vmmkit.tools.VmmkitCli", "run"));
        command.addAll(List.of(args));
        return command;
    }

    /**
     * Makes {@code env} a clean one for a run in {@code dir}: the embedded JVM loads the test's classes,
     * no setting of the caller's leaks in, and no other run's peak profile is read.
     */
    static void isolate(Map<String, String> env, Path dir) {
        env.put("VMMKIT_JAR", System.getProperty("java.class.path"));
        env.put("XDG_CACHE_HOME", dir.resolve("cache").toString());
        env.keySet().removeIf(key -> key.startsWith("VMM_"));
    }

    /** The shim as a program loads it with dlopen (as PyTorch loads a pluggable allocator): built. */
    static final Path SHIM = Path.of("target", "native", "libvmmkit_preload.so").toAbsolutePath();

    /**
     * The settings of a process that opens the shim with dlopen instead of having it preloaded: no
     * LD_PRELOAD, the shim's path in VMMKIT_SHIM, the test's JVM for the shim to start, the host driver.
     */
    static Map<String, String> dlopened() {
        return Map.of("LD_PRELOAD", "", "VMMKIT_SHIM", SHIM.toString(),
                "VMMKIT_JAVA_HOME", System.getProperty("java.home"), "VMM_DRIVER", "host");
    }

    /**
     * Runs {@code command} in {@code dir}'s clean environment ({@link #isolate}) with {@code extraEnv}
     * added, its output in {@code dir}; fails the test after two minutes.
     */
    static ProcessResult run(List<String> command, Map<String, String> extraEnv, Path dir)
            throws IOException, InterruptedException {
        ProcessBuilder builder = new ProcessBuilder(command)
                .redirectOutput(dir.resolve("stdout.txt").toFile())
                .redirectError(dir.resolve("stderr.txt").toFile());
        Map<String, String> env = builder.environment();
        isolate(env, dir);
        env.putAll(extraEnv);
        Process process = builder.start();
        if (!process.waitFor(120, TimeUnit.SECONDS)) {
            process.destroyForcibly();
            throw new AssertionError("timed out: " + command + "\nstdout:\n" + Files.readString(dir.resolve("stdout.txt"))
                    + "\nstderr:\n" + Files.readString(dir.resolve("stderr.txt")));
        }
        return new ProcessResult(process.exitValue(), Files.readString(dir.resolve("stdout.txt")),
                Files.readString(dir.resolve("stderr.txt")));
    }
}
