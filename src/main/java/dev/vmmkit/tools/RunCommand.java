package dev.vmmkit.tools;

import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.io.File;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * {@code vmmkit run [options] -- CMD [ARGS...]}: runs a program with vmmkit's native shim preloaded,
 * so its cudaMalloc/cudaFree (and async, memcpy) calls reach vmmkit. Each option becomes an environment
 * variable the shim reads; the variables can also be set directly. Returns the program's exit code.
 */
@Command(name = "run",
        mixinStandardHelpOptions = true,
        description = {"Run a CUDA program with vmmkit's allocator (LD_PRELOAD).",
                "Example: vmmkit run --stats stats.json -- python3 train.py"})
public final class RunCommand implements Callable<Integer> {
    static final String SHIM = "libvmmkit_preload.so";
    /** The AOT cache scripts/build-aot-cache.sh trains for a runtime image, kept in that image's home. */
    static final String AOT_CACHE = "vmmkit.aot";

    @Option(names = "--mode", description = "vmm (vmmkit serves allocations, default) or monitor (everything "
            + "passes through; only records). Sets VMM_MODE.")
    String mode;

    @Option(names = "--driver", description = "cuda (default) or host (emulation, for tests). Sets VMM_DRIVER.")
    String driver;

    @Option(names = "--stats", paramLabel = "FILE", description = "Write stats JSON here at exit. Sets VMM_STATS_FILE.")
    Path stats;

    @Option(names = "--trace", paramLabel = "FILE", description = "Record the program's requests here "
            + "(action,addr,size,stream). Sets VMM_TRACE_FILE.")
    Path trace;

    @Parameters(arity = "1..*", paramLabel = "CMD", description = "The program and its arguments (after --).")
    List<String> command;

    @Override
    public Integer call() throws Exception {
        if (mode != null && !mode.equals("vmm") && !mode.equals("monitor")) {
            System.err.println("vmmkit run: --mode must be vmm or monitor, not " + mode);
            return 2;
        }
        if (driver != null && !driver.equals("cuda") && !driver.equals("host")) {
            System.err.println("vmmkit run: --driver must be cuda or host, not " + driver);
            return 2;
        }
        Path home = installation();
        Path shim = Path.of(System.getenv().getOrDefault("VMMKIT_PRELOAD", home.resolve("native").resolve(SHIM).toString()));
        if (!Files.isReadable(shim)) {
            System.err.println("vmmkit run: native shim not found at " + shim + " (build with ./mvnw package)");
            return 2;
        }
        ProcessBuilder builder = new ProcessBuilder(command).inheritIO();
        builder.environment().putAll(environment(System.getenv(), shim));
        try {
            return builder.start().waitFor();
        } catch (java.io.IOException e) {
            System.err.println("vmmkit run: cannot start " + command.getFirst() + ": " + e.getMessage());
            return 127;
        }
    }

    /** The variables to add to {@code current} for the program. */
    Map<String, String> environment(Map<String, String> current, Path shim) throws URISyntaxException {
        Map<String, String> env = new HashMap<>();
        String preload = current.getOrDefault("LD_PRELOAD", "");
        env.put("LD_PRELOAD", shim.toAbsolutePath() + (preload.isBlank() ? "" : ":" + preload));
        if (mode != null) env.put("VMM_MODE", mode);
        if (driver != null) env.put("VMM_DRIVER", driver);
        if (stats != null) env.put("VMM_STATS_FILE", stats.toAbsolutePath().toString());
        if (trace != null) env.put("VMM_TRACE_FILE", trace.toAbsolutePath().toString());
        // A VMMKIT_JAR already set wins: it lets tests and developers choose what the embedded JVM loads.
        String jar = current.get("VMMKIT_JAR");
        env.put("VMMKIT_JAR", jar != null && !jar.isBlank() ? jar : codeSource().toString());
        env.put("VMMKIT_JAVA_HOME", System.getProperty("java.home"));
        // The AOT cache trained on this very runtime (scripts/build-runtime.sh), unless one is chosen already.
        Path runtimeCache = Path.of(System.getProperty("java.home"), AOT_CACHE);
        if (!current.containsKey("VMMKIT_AOT_CACHE") && Files.isReadable(runtimeCache)) {
            env.put("VMMKIT_AOT_CACHE", runtimeCache.toString());
        }
        return env;
    }

    /** Where vmmkit's classes were loaded from: target/vmmkit.jar, or target/classes in a build. */
    private static Path codeSource() throws URISyntaxException {
        return Path.of(RunCommand.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    }

    /** The folder holding the jar (or classes folder) and native/: target/. */
    private static Path installation() throws URISyntaxException {
        Path parent = codeSource().toAbsolutePath().getParent();
        return parent != null ? parent : Path.of(File.separator);
    }
}
