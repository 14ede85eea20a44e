package dev.vmmkit.interpose;

import dev.vmmkit.core.ManagedMemoryResource;
import dev.vmmkit.core.ProcessAllocators;
import dev.vmmkit.driver.VmmLog;
import dev.vmmkit.ipc.IpcExports;
import dev.vmmkit.ipc.IpcImports;
import dev.vmmkit.trace.AllocationRecorder;
import dev.vmmkit.trace.RecordingResource;
import dev.vmmkit.trace.RequestLedger;
import dev.vmmkit.trace.TraceFileRecorder;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Everything one interposed process needs, made once when the shim starts Java: the mode, the
 * per-device allocators (vmm mode), the ledger (monitor mode), the trace recorder and the stats file.
 * In a process that lent its own allocators ({@link ProcessAllocators}: an engine worker) those
 * serve, and a device without one passes through. Otherwise settings come from the environment that {@code vmmkit run} sets: {@code VMM_STATS_FILE},
 * {@code VMM_TRACE_FILE}, {@code VMM_PROFILE} (and, for the allocators, {@code VMM_DRIVER}, {@code VMM_DEVICE_MEMORY},
 * the {@code VMM_*} keys of {@link dev.vmmkit.core.VmmConfig}); under {@code vmmkit run} the stats
 * file and the trace are this process's parts of the run's ({@link RunParts}).
 */
final class InterposeSession {
    final boolean monitorMode;
    final DeviceManagers managers;
    final RequestLedger ledger = new RequestLedger();
    final AllocationRecorder recorder;
    final IpcExports exports = new IpcExports();
    final IpcImports imports = new IpcImports();
    /** The memory-tag regions each thread has open, over every device's allocator. */
    final ThreadTagRegions tagRegions = new ThreadTagRegions();
    final PeakProfileUse profile;
    final NotServedWatch notServed;
    /**
     * Whether the program routes all its device memory to vmmkit, so that memory from elsewhere is
     * worth a line at exit; false under {@code VMM_SERVES=tags} (the stats file keeps the figure,
     * read at exit).
     */
    private final boolean servesAll;
    /** The breakdowns of the first large allocation, pause and resume ({@code VMM_LOG=info}), else null. */
    final FirstCalls firstCalls;
    private final Path statsFile;
    private final AtomicBoolean finished = new AtomicBoolean();

    /** A session whose allocators come from {@code factory}, each wrapped in a recording adaptor when {@code recorder} records. */
    InterposeSession(boolean monitorMode, ResourceFactory factory, AllocationRecorder recorder, Path statsFile) {
        this(monitorMode, factory, recorder, statsFile, PeakProfileUse.NONE, new NotServedWatch(), null, true);
    }

    /**
     * That, with the program's peak profile (read by {@code factory}'s allocators, saved at a
     * successful exit); {@code servesAll}: see {@link #servesAll}.
     */
    InterposeSession(boolean monitorMode, ResourceFactory factory, AllocationRecorder recorder, Path statsFile,
                     PeakProfileUse profile, NotServedWatch notServed, FirstCalls firstCalls, boolean servesAll) {
        this.monitorMode = monitorMode;
        this.servesAll = servesAll;
        this.firstCalls = firstCalls;
        this.profile = profile;
        this.notServed = notServed;
        this.managers = new DeviceManagers(device -> {
            ManagedMemoryResource resource = factory.open(device);
            return resource == null ? null : RecordingResource.over(resource, recorder);
        });
        this.recorder = recorder;
        this.statsFile = statsFile;
    }

    static InterposeSession fromEnvironment(boolean monitorMode, Map<String, String> env)
            throws ReflectiveOperationException {
        // A process that runs vmmkit itself and claimed the shim (an engine worker) lends its own
        // allocators: no second one, and no profile (its allocator's settings are the process's).
        boolean lent = !monitorMode && ProcessAllocators.claimed();
        // Monitor mode has no allocator to hint, and its peaks are the runtime's: no profile.
        PeakProfileUse profile = monitorMode || lent ? PeakProfileUse.NONE : PeakProfileUse.fromEnvironment(env);
        // Serving the tags only, the rest is the program's own by design: no sampling thread
        // beside it (and its cuMemGetInfo calls), only the sample at exit for the stats file.
        boolean tagsOnly = InterposeSettings.servesTagsOnly(env);
        NotServedWatch notServed = tagsOnly ? new NotServedWatch(0) : new NotServedWatch();
        if (!monitorMode && !lent) notServed.startEarly();
        FirstCalls firstCalls = !monitorMode && !lent && VmmLog.isInfo() ? new FirstCalls() : null;
        ResourceFactory factory = monitorMode ? device -> null
                : lent ? ProcessAllocators::lent
                : VmmManagerFactory.orSystemProperty(profile, notServed, firstCalls);
        long pid = ProcessHandle.current().pid();
        Path stats = RunParts.pathFor(RunParts.Output.STATS, env, pid);
        if (stats != null) markUnfinished(stats, monitorMode);
        Path trace = RunParts.pathFor(RunParts.Output.TRACE, env, pid);
        return new InterposeSession(monitorMode, factory, recorder(trace, monitorMode), stats, profile, notServed, firstCalls,
                !tagsOnly);
    }

    /** The trace recorder; a trace that cannot be opened is one warning, and the program runs untraced. */
    private static AllocationRecorder recorder(Path trace, boolean monitorMode) {
        if (trace == null) return AllocationRecorder.NONE;
        try {
            return new TraceFileRecorder(trace, monitorMode ? "monitor" : "vmm",
                    (message, cause) -> InterposeLog.warnOnce("trace", message, cause));
        } catch (IOException | RuntimeException e) {
            InterposeLog.warnOnce("trace", "cannot write the trace " + trace + "; tracing is off", e);
            return AllocationRecorder.NONE;
        }
    }

    /**
     * Replaces any older stats file at once, so that a program that dies before its exit handlers
     * run leaves a file saying so (complete: false) rather than another run's figures.
     */
    private static void markUnfinished(Path stats, boolean monitorMode) {
        try {
            StatsWriter.write(stats, StatsWriter.unfinishedJson(monitorMode));
        } catch (IOException | RuntimeException e) {
            InterposeLog.warnOnce("stats", "cannot write the stats file " + stats, e);
        }
    }

    /** One line per device (at most) when the program used device memory that vmmkit did not serve. */
    private void sayWhatWasNotServed() {
        try {
            notServed.stop();
            if (!servesAll) return;
            List<Integer> devices = notServed.watchedDevices();
            if (devices.isEmpty()) {
                NotServedMemory.linesWithoutDevices(NotServedMemory.Clues.ofThisProcess(0)).forEach(System.err::println);
                return;
            }
            NotServedMemory.Clues clues = null;
            for (int device : devices) {
                NotServedWatch.Peak peak = notServed.peak(device);
                if (peak == null) continue;
                if (clues == null) clues = NotServedMemory.Clues.ofThisProcess(devices.size());
                NotServedMemory.lines(device, peak, clues).forEach(System.err::println);
            }
        } catch (Throwable e) {
            InterposeLog.warnOnce("not-served", "cannot tell what vmmkit did not serve", e);
        }
    }

    /**
     * Closes the trace, saves the peak profile (exit status 0 only) and writes the stats file; runs
     * once, whoever calls first (the exit handler or a shutdown hook).
     */
    void finish(long passthroughCalls, int exitStatus) {
        if (!finished.compareAndSet(false, true)) return;
        StartUpWarmUp.stop();
        try {
            recorder.close();
        } catch (Throwable e) {
            InterposeLog.warnOnce("trace-close", "cannot finish the trace", e);
        }
        if (firstCalls != null) {
            String warmUp = StartUpWarmUp.summary();
            if (warmUp != null) InterposeLog.info(warmUp);
            firstCalls.report();
        }
        List<StatsWriter.DeviceFigures> devices = monitorMode ? List.of() : managers.stats();
        profile.save(devices, exitStatus);
        sayWhatWasNotServed();
        if (statsFile == null) return;
        try {
            StatsWriter.write(statsFile, monitorMode
                    ? StatsWriter.monitorJson(ledger, passthroughCalls)
                    : StatsWriter.vmmJson(devices, passthroughCalls, profile, notServed::peak));
        } catch (Throwable e) {
            InterposeLog.warnOnce("stats", "cannot write the stats file " + statsFile, e);
        }
    }
}
