package dev.vmmkit.tools;

import dev.vmmkit.driver.AotCache;
import dev.vmmkit.driver.NativeShim;
import dev.vmmkit.interpose.FrameworkSettings;
import dev.vmmkit.interpose.InterposeSettings;
import dev.vmmkit.interpose.StatsWriter;
import dev.vmmkit.tools.run.ProfileSummary;
import dev.vmmkit.tools.run.RunOutputs;
import dev.vmmkit.tools.run.SignalForwarding;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Callable;

/**
 * {@code vmmkit run [options] -- CMD [ARGS...]}: runs a program with vmmkit's native shim preloaded,
 * so its cudaMalloc/cudaFree (and async, memcpy) calls reach vmmkit. Each option becomes an environment
 * variable the shim reads; the variables can also be set directly. Returns the program's exit code
 * (128 + N when signal N ended it); SIGINT, SIGTERM and SIGHUP are forwarded to the program
 * ({@link SignalForwarding}). The stats and trace paths are checked before the program starts, and
 * a stats file is always written ({@link #finishStats}); each of the program's processes writes its
 * own parts, put together when it ends ({@link RunOutputs}). In vmm mode one line on stderr says how the
 * program's peak profile was used and whether it was saved ({@link ProfileSummary}).
 */
@Command(name = "run",
        mixinStandardHelpOptions = true,
        description = {"Run a CUDA program with vmmkit's allocator (LD_PRELOAD).",
                "In vmm mode JAX gets XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async and XLA_PYTHON_CLIENT_PREALLOCATE=false "
                        + "unless they are set, so that its buffers reach vmmkit.",
                "Example: vmmkit run --stats stats.json -- python3 train.py"})
public final class RunCommand implements Callable<Integer> {
    @Option(names = "--mode", description = "vmm (vmmkit serves allocations, default) or monitor (everything "
            + "passes through; only records). Sets VMM_MODE.")
    String mode;

    @Option(names = "--driver", description = "cuda (default) or host (emulation, for tests). Sets VMM_DRIVER.")
    String driver;

    @Mixin
    DeviceMemoryOption deviceMemory = new DeviceMemoryOption();

    @Option(names = "--stats", paramLabel = "FILE", description = "Write stats JSON here at exit. Sets VMM_STATS_FILE.")
    Path stats;

    @Option(names = "--trace", paramLabel = "FILE", description = "Record the program's requests here "
            + "(action,addr,size,stream). Sets VMM_TRACE_FILE.")
    Path trace;

    @Option(names = "--html", paramLabel = "FILE", description = "After the program ends, write a memory report "
            + "(self-contained HTML): the requests it made, replayed through vmmkit's allocator on the host emulation "
            + "(see vmmkit replay --html). Records a trace for it (a temporary one unless --trace is given).")
    Path html;

    @Option(names = "--profile", paramLabel = "off|auto|FILE", description = "The program's peak profile: its peak "
            + "memory per device, saved when it exits with status 0 and used by its next run as the allocator's peak "
            + "hint (VMM_PEAK_HINT wins when set). auto (default): one file per program (executable, arguments, "
            + "folder, PyTorch's memory variables) in $XDG_CACHE_HOME/vmmkit/profiles; off: none; FILE: this file. "
            + "Sets VMM_PROFILE.")
    String profile;

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
        Path shim = NativeShim.path(System.getenv());
        if (!Files.isReadable(shim)) {
            System.err.println("vmmkit run: native shim not found at " + shim + " (build with ./mvnw package)");
            return 2;
        }
        Map<String, String> env = new HashMap<>(System.getenv());
        env.putAll(environment(System.getenv(), shim));
        List<String> badSettings = InterposeSettings.problems(env);
        if (!badSettings.isEmpty()) {
            badSettings.forEach(problem -> System.err.println("vmmkit run: " + problem));
            return 2;
        }
        Path statsFile = pathOf(env.get("VMM_STATS_FILE"));
        Path traceFile = pathOf(env.get("VMM_TRACE_FILE"));
        OutputFiles outputs = new OutputFiles().add("stats file", statsFile).add("trace", traceFile).add("HTML report", html);
        Optional<String> problem = outputs.problem();
        if (problem.isPresent()) {
            System.err.println("vmmkit run: " + problem.get());
            return 2;
        }
        outputs.removeStale();
        boolean monitorMode = "monitor".equals(env.get("VMM_MODE"));
        // The profile line needs the run's figures: a temporary stats file unless --stats is given.
        boolean profileLine = !monitorMode && !"off".equals(env.getOrDefault("VMM_PROFILE", "").trim());
        Path summaryStats = statsFile;
        if (profileLine && summaryStats == null) {
            summaryStats = Files.createTempFile("vmmkit-run-", ".json");
            Files.delete(summaryStats);
            env.put("VMM_STATS_FILE", summaryStats.toString());
        }
        Path reportTrace = traceFile;
        if (html != null && reportTrace == null) {
            reportTrace = Files.createTempFile("vmmkit-run-", ".csv");
            Files.delete(reportTrace); // so that its absence afterwards means "never finished"
            env.put("VMM_TRACE_FILE", reportTrace.toString());
        }
        try (RunOutputs outputsOfEachProcess = RunOutputs.forProgram(env)) {
            int status = runProgram(env);
            if (summaryStats != null) outputsOfEachProcess.collectStats(summaryStats);
            if (reportTrace != null) {
                outputsOfEachProcess.collectTraces(reportTrace).forEach(line -> System.err.println("vmmkit run: " + line));
            }
            if (statsFile != null) finishStats(statsFile, monitorMode, status);
            if (profileLine) {
                ProfileSummary.of(summaryStats, status).ifPresent(line -> System.err.println("vmmkit run: " + line));
            }
            if (html != null) writeReport(reportTrace, monitorMode);
            return status;
        } finally {
            if (reportTrace != null && traceFile == null) Files.deleteIfExists(reportTrace);
            if (summaryStats != null && statsFile == null) Files.deleteIfExists(summaryStats);
        }
    }

    /**
     * The HTML report of the run: its trace replayed through vmmkit on the host emulation, whose
     * summary goes to stderr (the program's stdout stays its own). The run's exit status is the
     * program's whatever happens here.
     */
    private void writeReport(Path trace, boolean monitorMode) {
        if (!Files.exists(trace)) {
            System.err.println("vmmkit run: no HTML report: the program made no CUDA allocation call, or ended "
                    + "before vmmkit finished its trace");
            return;
        }
        String note = "From the requests the program made (vmmkit run, " + (monitorMode ? "monitor" : "vmm")
                + " mode), replayed through vmmkit's allocator on the host emulation. Physical figures equal the run's "
                + "when its device has the same allocation granularity (2 MiB on current NVIDIA GPUs); times are the emulation's.";
        java.io.PrintWriter err = new java.io.PrintWriter(System.err, true);
        int exit = new picocli.CommandLine(new ReplayCommand().reportNote(note)).setCaseInsensitiveEnumValuesAllowed(true)
                .setOut(err).setErr(err)
                .execute("--driver", "host", "--warmup", "0", "--html", html.toString(), trace.toString());
        if (exit != 0) System.err.println("vmmkit run: the HTML report could not be written");
    }

    /** Starts the program, forwards signals to it while it runs, and returns its exit status. */
    private int runProgram(Map<String, String> env) throws InterruptedException {
        ProcessBuilder builder = new ProcessBuilder(command).inheritIO();
        builder.environment().clear();
        builder.environment().putAll(env);
        try (SignalForwarding signals = SignalForwarding.install()) {
            if (signals.pending() != 0) return 128 + signals.pending();
            Process program;
            try {
                program = builder.start();
            } catch (java.io.IOException e) {
                System.err.println("vmmkit run: cannot start " + command.getFirst() + ": " + e.getMessage());
                return 127;
            }
            signals.forwardTo(program.pid());
            // Java reports a program ended by signal N as 128 + N, as shells do.
            return program.waitFor();
        }
    }

    /**
     * vmmkit writes the stats file inside the program, where it starts on the first CUDA call. A
     * program that made none has no file: write one with zero counts. One that died before its exit
     * handlers ran has the file vmmkit wrote at its start, marked incomplete.
     */
    private static void finishStats(Path statsFile, boolean monitorMode, int status) throws java.io.IOException {
        if (!Files.exists(statsFile)) {
            StatsWriter.write(statsFile, StatsWriter.noCallsJson(monitorMode));
        } else if (Files.readString(statsFile).contains("\"complete\":false")) {
            System.err.println("vmmkit run: the program ended (status " + status + ") before vmmkit could write "
                    + "its figures; " + statsFile + " says \"complete\": false");
        }
    }

    private static Path pathOf(String value) {
        return value == null || value.isBlank() ? null : Path.of(value);
    }

    /** The variables to add to {@code current} for the program. */
    Map<String, String> environment(Map<String, String> current, Path shim) {
        Map<String, String> env = new HashMap<>();
        env.put("LD_PRELOAD", NativeShim.preloadList(shim.toAbsolutePath(), current.get("LD_PRELOAD")));
        if (mode != null) env.put("VMM_MODE", mode);
        env.put(InterposeSettings.SERVES, "all"); // preloaded, vmmkit serves every allocation, whatever a parent set
        if (driver != null) env.put("VMM_DRIVER", driver);
        if (deviceMemory.given()) env.put(DeviceMemoryOption.ENVIRONMENT, Long.toString(deviceMemory.bytes()));
        if (stats != null) env.put("VMM_STATS_FILE", stats.toAbsolutePath().toString());
        if (trace != null) env.put("VMM_TRACE_FILE", trace.toAbsolutePath().toString());
        if (profile != null) {
            String choice = profile.trim();
            boolean file = !choice.equals("off") && !choice.equals("auto");
            env.put("VMM_PROFILE", file ? Path.of(choice).toAbsolutePath().toString() : choice);
        }
        boolean monitor = "monitor".equals(env.getOrDefault("VMM_MODE", current.get("VMM_MODE")));
        if (!monitor) env.putAll(FrameworkSettings.missingFrom(current)); // monitor mode leaves the program as it is
        // A VMMKIT_JAR already set wins: it lets tests and developers choose what the embedded JVM loads.
        String jar = current.get("VMMKIT_JAR");
        env.put("VMMKIT_JAR", jar != null && !jar.isBlank() ? jar : NativeShim.codeSource().toString());
        env.put("VMMKIT_JAVA_HOME", System.getProperty("java.home"));
        // The AOT cache trained on this very runtime (scripts/build-runtime.sh), unless one is chosen already.
        if (!current.containsKey(AotCache.SETTING)) {
            AotCache.ofThisRuntime().ifPresent(cache -> env.put(AotCache.SETTING, cache.toString()));
        }
        return env;
    }
}
