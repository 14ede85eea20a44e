package dev.vmmkit.engine;

import dev.vmmkit.driver.AotCache;
import dev.vmmkit.driver.NativeShim;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * How an engine worker is started: the host's own {@code java} and class path running
 * {@link EngineWorkerMain}, under vmmkit's native shim ({@link NativeShim}), so that an engine that
 * calls CUDA itself gets its device memory from the worker's allocator. The shim costs a worker
 * that never calls CUDA nothing but its loading: it joins the worker's JVM on the first CUDA
 * allocation call, and the worker lends it its allocator ({@code core.ProcessAllocators}).
 */
final class WorkerCommand {
    /** Settings of a host run under {@code vmmkit run} that are the host's own, not its workers'. */
    private static final List<String> HOST_ONLY = List.of("VMM_MODE", "VMM_STATS_FILE", "VMM_TRACE_FILE");
    private static final AtomicBoolean SAID_NO_SHIM = new AtomicBoolean();

    private WorkerCommand() {
    }

    /** The same JVM and class path as the host's, running {@link EngineWorkerMain}; its crash report goes to {@code errorFile}. */
    static List<String> java(Path errorFile) {
        List<String> command = new ArrayList<>();
        command.add(ProcessHandle.current().info().command().orElse(Path.of(System.getProperty("java.home"), "bin", "java").toString()));
        command.add("--enable-native-access=ALL-UNNAMED");
        command.add("-XX:+UseSerialGC");
        // A worker lives as long as its model: full tiered compilation (no C1-only flag), and the
        // AOT cache for its start.
        AotCache.forChildJvm(System.getenv()).ifPresent(cache -> command.add("-XX:AOTCache=" + cache));
        command.add("-Xss4m");
        command.add("-XX:-CreateCoredumpOnCrash");
        command.add("-XX:+DisplayVMOutputToStderr");
        command.add("-XX:ErrorFile=" + errorFile);
        command.add("-Djava.io.tmpdir=" + System.getProperty("java.io.tmpdir"));
        String log = System.getProperty("vmmkit.log");
        if (log != null) command.add("-Dvmmkit.log=" + log);
        String pauseFault = System.getProperty(WorkerModelTag.PAUSE_FAULT_PROPERTY);
        if (pauseFault != null) command.add("-D" + WorkerModelTag.PAUSE_FAULT_PROPERTY + "=" + pauseFault);
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(EngineWorkerMain.class.getName());
        return command;
    }

    /**
     * Makes {@code env} (the host's, inherited) the worker's: the shim preloaded, on the host's
     * driver kind ({@code VMM_DRIVER}: cuda, or the host emulation), and none of the host's own run
     * settings. Without a shim build the worker runs without it, said once: an engine's own CUDA
     * allocations then come from the CUDA runtime, outside vmmkit.
     */
    static void environment(Map<String, String> env, String driverKind) {
        HOST_ONLY.forEach(env::remove);
        env.put("VMM_DRIVER", driverKind);
        Path shim = NativeShim.path(env);
        if (!Files.isReadable(shim)) {
            if (SAID_NO_SHIM.compareAndSet(false, true)) {
                EngineHost.LOGGER.log(System.Logger.Level.WARNING, "engine workers run without vmmkit's shim (" + shim
                        + " not found): an engine's own CUDA allocations are not served by vmmkit");
            }
            return;
        }
        env.put("LD_PRELOAD", NativeShim.preloadList(shim, env.get("LD_PRELOAD")));
        env.put("VMMKIT_JAR", NativeShim.codeSource().toString());
    }
}
