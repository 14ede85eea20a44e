package dev.vmmkit.driver;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Optional;

/**
 * The AOT cache a JVM of vmmkit's starts with (see {@code interpose.AotTraining}): classes loaded
 * and linked ahead, and the training run's profiles, which take a fifth to a third off a JVM's
 * start. {@code VMMKIT_AOT_CACHE} when set; else the one {@code scripts/build-runtime.sh} trained
 * for the running Java ({@code vmmkit.aot} in its home); else the one the build writes beside the
 * jar. A cache matches the JVM that trained it alone; the shim's C bootstrap applies the same rule.
 */
public final class AotCache {
    /** The setting that names another cache. */
    public static final String SETTING = "VMMKIT_AOT_CACHE";
    /** The file name the build and scripts/build-runtime.sh give it. */
    public static final String FILE = "vmmkit.aot";

    private AotCache() {
    }

    /** The cache trained for this runtime, when it has one (the value {@code vmmkit run} hands its program). */
    public static Optional<Path> ofThisRuntime() {
        Path cache = Path.of(System.getProperty("java.home"), FILE);
        return Files.isReadable(cache) ? Optional.of(cache) : Optional.empty();
    }

    /** The cache a JVM started from this one with {@code env} should use, if any. */
    public static Optional<Path> forChildJvm(Map<String, String> env) {
        String chosen = env.get(SETTING);
        if (chosen != null && !chosen.isBlank() && Files.isReadable(Path.of(chosen))) return Optional.of(Path.of(chosen));
        Optional<Path> runtime = ofThisRuntime();
        if (runtime.isPresent()) return runtime;
        Path besideJar = NativeShim.codeSource().resolveSibling(FILE);
        return Files.isReadable(besideJar) && NativeShim.codeSource().toString().endsWith(".jar") ? Optional.of(besideJar) : Optional.empty();
    }
}
