package dev.vmmkit.interpose;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** {@code vmmkit run ARGS} as a test starts it: a new JVM on the test's class path, as a user runs it. */
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
}
