package dev.vmmkit.tools;

import dev.vmmkit.core.OutOfDeviceMemoryException;
import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.DriverKind;
import dev.vmmkit.driver.Drivers;
import dev.vmmkit.driver.DeviceBytes;
import dev.vmmkit.tools.replay.CudaMallocAsyncBackend;
import dev.vmmkit.tools.replay.PatternCheck;
import dev.vmmkit.tools.replay.ProgressBar;
import dev.vmmkit.tools.replay.ReplayBackend;
import dev.vmmkit.tools.replay.VmmBackend;
import dev.vmmkit.tools.replay.ReplayException;
import dev.vmmkit.tools.replay.ReplayReport;
import dev.vmmkit.tools.replay.ReplaySummary;
import dev.vmmkit.tools.replay.ReplayTarget;
import dev.vmmkit.tools.replay.Replayer;
import dev.vmmkit.tools.replay.ReportFiles;
import dev.vmmkit.tools.report.HtmlReport;
import dev.vmmkit.tools.report.MemoryReport;
import dev.vmmkit.tools.report.PeakAllocations;
import dev.vmmkit.tools.report.ReportSampler;
import dev.vmmkit.trace.AllocationTrace;
import dev.vmmkit.trace.RecordedMemory;
import dev.vmmkit.trace.TraceFiles;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.concurrent.Callable;

/**
 * {@code vmmkit replay}: replays recorded allocation traces through vmmkit's allocator and reports
 * latency, memory and driver-call figures. Exit code 0 when every trace replayed, 1 for a bad trace,
 * a failed request or a verify failure (one line on stderr), 2 for a usage error.
 */
@Command(name = "replay",
        mixinStandardHelpOptions = true,
        description = {
                "Replays allocation traces (vmmkit's action,addr,size,stream CSV, or a PyTorch memory snapshot "
                        + "from torch.cuda.memory._dump_snapshot; plain or gzipped) through vmmkit's "
                        + "allocator, a fresh one per run, and prints latency, memory and driver-call figures.",
                "With one trace --json holds one report object; with several, an object keyed by trace file name."},
        exitCodeListHeading = "%nExit codes:%n",
        exitCodeList = {"0:every trace replayed", "1:bad trace, failed request or verify failure", "2:usage error, an output file that cannot be written or a bad VMM_* setting"})
public final class ReplayCommand implements Callable<Integer> {

    /** Opens the driver a replay runs on; tests substitute their own allocator here. */
    @FunctionalInterface
    interface BackendFactory {
        ReplayBackend open(DriverKind kind, int device, long deviceMemoryBytes, VmmConfig config);
    }

    @Spec
    private CommandSpec spec;

    @Option(names = "--driver", defaultValue = "auto", paramLabel = "host|cuda|auto",
            description = "Driver to replay on: host emulation, a CUDA device, or CUDA when present (default: ${DEFAULT-VALUE}).")
    private DriverKind driver;

    @Option(names = "--backend", defaultValue = "vmm", paramLabel = "vmm|cuda-malloc-async",
            description = "Allocator to replay through: vmm (vmmkit, on --driver) or cuda-malloc-async (the CUDA "
                    + "runtime's cudaMallocAsync/cudaFreeAsync on stream 0, for comparison; needs a GPU). Default: ${DEFAULT-VALUE}.")
    private String backend;

    @Option(names = "--device", paramLabel = "N",
            description = "CUDA device ordinal (default: 0). For a PyTorch snapshot, also replay only the trace of its device N "
                    + "(default: every device that has one).")
    private Integer device;

    @Mixin
    private DeviceMemoryOption deviceMemory;

    @Option(names = "--chunk-size", paramLabel = "BYTES", converter = ByteSizeConverter.class,
            description = "Physical chunk size, e.g. 2M (default: VMM_CHUNK_SIZE, else the granularity).")
    private Long chunkBytes;

    @Option(names = "--peak-hint", paramLabel = "BYTES", converter = ByteSizeConverter.class,
            description = "A peak of live bytes known in advance, e.g. 710M: the allocator's physical budget starts "
                    + "there (default: VMM_PEAK_HINT, else none). The peak profiles of vmmkit run are never read here.")
    private Long peakHintBytes;

    @Option(names = "--warmup", defaultValue = "1", paramLabel = "N",
            description = "Replays each trace N times on a fresh allocator first and discards the figures, "
                    + "so JIT compilation is not measured (default: ${DEFAULT-VALUE}).")
    private int warmupRuns;

    @Option(names = "--json", paramLabel = "FILE",
            description = "Also write the figures as JSON (written whole or not at all).")
    private Path jsonFile;

    @Option(names = "--html", paramLabel = "FILE",
            description = "Also write a memory report: one self-contained HTML file with charts of live and "
                    + "reserved memory and driver calls over the trace, the address space at the peak and the "
                    + "largest allocations then (from one more replay, not the measured one).")
    private Path htmlFile;

    @Option(names = "--verify",
            description = "Write a pattern into each allocation and check it at its free (host driver only).")
    private boolean verify;

    @Parameters(arity = "1..*", paramLabel = "TRACE", description = "Trace files to replay, in order.")
    private List<Path> traceFiles;

    private final BackendFactory backends;
    /** Where the VMM_* settings come from (tests give their own). */
    private Map<String, String> environment = System.getenv();
    /** Shown under each title of the HTML report (vmmkit run says where the trace came from). */
    private String reportNote = "";

    public ReplayCommand() {
        this((kind, device, deviceMemoryBytes, config) -> new VmmBackend(Drivers.open(kind, device, deviceMemoryBytes), config));
    }

    ReplayCommand(BackendFactory backends) {
        this.backends = backends;
    }

    /** Reads the VMM_* settings from {@code env} instead of the process environment. */
    ReplayCommand environment(Map<String, String> env) {
        this.environment = env;
        return this;
    }

    /** Sets the note under each title of the HTML report. */
    ReplayCommand reportNote(String note) {
        this.reportNote = note;
        return this;
    }

    @Override
    public Integer call() {
        checkOptions();
        PrintWriter err = spec.commandLine().getErr();
        List<String> badSettings = new ArrayList<>(VmmConfig.problems(environment));
        if (chunkBytes != null) {
            VmmConfig.problems(Map.of("VMM_CHUNK_SIZE", Long.toString(chunkBytes))).forEach(problem ->
                    badSettings.add(problem.replaceFirst("^VMM_CHUNK_SIZE=", "--chunk-size ")));
        }
        if (!badSettings.isEmpty()) {
            badSettings.forEach(problem -> err.println("vmmkit replay: " + problem));
            err.flush();
            return VmmkitCli.EXIT_ERROR;
        }
        Optional<String> unwritable = new OutputFiles().add("--json", jsonFile).add("--html", htmlFile).problem();
        if (unwritable.isPresent()) {
            err.println("vmmkit replay: " + unwritable.get());
            err.flush();
            return VmmkitCli.EXIT_ERROR;
        }
        try {
            // Every trace is read (and checked) before any is replayed, so a bad one fails fast.
            List<AllocationTrace> traces = new ArrayList<>();
            List<Path> files = new ArrayList<>();
            for (Path file : traceFiles) {
                for (AllocationTrace trace : TraceFiles.read(file, device == null ? OptionalInt.empty() : OptionalInt.of(device))) {
                    traces.add(trace);
                    files.add(file);
                }
            }
            List<MemoryReport> memoryReports = new ArrayList<>();
            Map<String, ReplayReport> reports = replayAll(traces, files, memoryReports);
            if (jsonFile != null) {
                Object json = reports.size() == 1 ? reports.values().iterator().next() : reports;
                ReportFiles.write(jsonFile, json);
            }
            if (htmlFile != null) HtmlReport.write(htmlFile, "vmmkit replay " + String.join(" ", traceNames()), memoryReports);
            return 0;
        } catch (IOException | ReplayException | DriverException | OutOfDeviceMemoryException
                 | UnsupportedOperationException | IllegalArgumentException | IllegalStateException e) {
            err.println("vmmkit replay: " + e.getMessage());
            err.flush();
            return 1;
        }
    }

    private void checkOptions() {
        CommandLine commandLine = spec.commandLine();
        if (warmupRuns < 0) throw new CommandLine.ParameterException(commandLine, "--warmup must be >= 0");
        if (deviceMemory.given() && !backend.equals("vmm")) {
            throw new CommandLine.ParameterException(commandLine, "--device-memory applies to --backend vmm only");
        }
        if (chunkBytes != null && chunkBytes < 0) {
            throw new CommandLine.ParameterException(commandLine, "--chunk-size must be >= 0");
        }
        if (peakHintBytes != null && peakHintBytes < 0) {
            throw new CommandLine.ParameterException(commandLine, "--peak-hint must be >= 0");
        }
    }

    private List<String> traceNames() {
        return traceFiles.stream().map(p -> String.valueOf(p.getFileName())).toList();
    }

    private Map<String, ReplayReport> replayAll(List<AllocationTrace> traces, List<Path> files, List<MemoryReport> memoryReports) {
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        VmmConfig config = VmmConfig.from(environment);
        if (chunkBytes != null) config = config.withChunkBytes(chunkBytes);
        if (peakHintBytes != null) config = config.withPeakHintBytes(peakHintBytes);
        Map<String, ReplayReport> reports = new LinkedHashMap<>();
        try (ReplayBackend backend = openBackend(config)) {
            PatternCheck check = verify ? patternCheck(backend) : null;
            for (int i = 0; i < traces.size(); i++) {
                AllocationTrace trace = traces.get(i);
                ReplayReport report = replay(backend, trace, check).describing(trace);
                out.print(ReplaySummary.format(trace.name(), backend.driverName(), report));
                out.flush();
                if (report.peakLiveBytes() != trace.peakLiveBytes()) {
                    err.printf("warning: %s: the allocator counts peak live %d bytes, the trace has %d%n",
                            trace.name(), report.peakLiveBytes(), trace.peakLiveBytes());
                    err.flush();
                }
                reports.put(reportKey(reports, trace, files.get(i)), report);
                if (htmlFile != null) memoryReports.add(memoryReport(backend, trace, report));
            }
        }
        return reports;
    }

    private int cudaDevice() {
        return device == null ? 0 : device;
    }

    private ReplayBackend openBackend(VmmConfig config) {
        return switch (backend) {
            case "vmm" -> backends.open(driver, cudaDevice(), deviceMemory.bytes(), config);
            case "cuda-malloc-async" -> new CudaMallocAsyncBackend(cudaDevice());
            default -> throw new CommandLine.ParameterException(spec.commandLine(),
                    "--backend must be vmm or cuda-malloc-async, not " + backend);
        };
    }

    /** Warm-up runs first, each on a fresh allocator, then the measured run on another fresh one. */
    private ReplayReport replay(ReplayBackend backend, AllocationTrace trace, PatternCheck check) {
        Replayer replayer = new Replayer(trace);
        PrintWriter err = spec.commandLine().getErr();
        for (int run = 0; run < warmupRuns; run++) {
            try (ReplayTarget target = backend.newTarget()) {
                replayer.replay(target, check, ProgressBar.onTerminal(err, trace.name() + " (warm-up)", trace.ops()));
            }
        }
        try (ReplayTarget target = backend.newTarget()) {
            ReplayReport report = replayer.replay(target, check, ProgressBar.onTerminal(err, trace.name(), trace.ops()));
            String driverTime = backend.driverTime();
            if (!driverTime.isEmpty()) err.println("vmmkit replay: " + trace.name() + ": " + driverTime);
            return report;
        }
    }

    /** One more replay, followed by a {@link ReportSampler}, for the HTML report; {@code measured} gives the figures. */
    private MemoryReport memoryReport(ReplayBackend backend, AllocationTrace trace, ReplayReport measured) {
        PeakAllocations peak = PeakAllocations.of(trace, MemoryReport.LARGEST);
        ReportSampler sampler = new ReportSampler(trace.ops(), peak.peakOp(),
                trace.recorded().map(RecordedMemory::reservedAtOp).orElse(null));
        try (ReplayTarget target = backend.newTarget()) {
            new Replayer(trace).replay(target, null, sampler);
        }
        return MemoryReport.of(trace, backend.driverName(), reportNote, measured, peak, sampler, backend.pageBytes());
    }

    private static PatternCheck patternCheck(ReplayBackend backend) {
        DeviceBytes bytes = backend.deviceBytes().orElseThrow(() -> new UnsupportedOperationException(
                "--verify needs the host driver: vmmkit cannot copy " + backend.driverName()
                        + " device memory to the host yet"));
        return new PatternCheck(bytes);
    }

    /** The trace's file name, or its path as given when two traces share a file name. */
    private static String reportKey(Map<String, ReplayReport> reports, AllocationTrace trace, Path file) {
        String key = trace.name();
        if (reports.containsKey(key)) key = file.toString();
        for (int n = 2; reports.containsKey(key); n++) key = file + " (" + n + ")";
        return key;
    }
}
