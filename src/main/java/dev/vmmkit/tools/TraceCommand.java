package dev.vmmkit.tools;

import dev.vmmkit.trace.AllocationTrace;
import dev.vmmkit.trace.TraceFiles;
import dev.vmmkit.trace.TraceWriter;
import org.agrona.collections.LongArrayList;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.concurrent.Callable;

/** {@code vmmkit trace}: tools for trace files; {@code convert} writes a PyTorch snapshot as vmmkit's CSV. */
@Command(name = "trace", mixinStandardHelpOptions = true,
        description = "Tools for allocation trace files.",
        subcommands = TraceCommand.Convert.class)
public final class TraceCommand implements Runnable {

    @Spec
    private CommandSpec spec;

    @Override
    public void run() {
        spec.commandLine().usage(spec.commandLine().getOut());
    }

    /** {@code vmmkit trace convert SNAPSHOT OUT}. */
    @Command(name = "convert", mixinStandardHelpOptions = true,
            description = {"Writes the requests of a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot; plain or "
                    + "gzipped) as vmmkit's trace CSV (action,addr,size,stream), gzipped when OUT ends in .gz.",
                    "Allocations made before a truncated trace's first entry come first. PyTorch's own segment "
                            + "figures stay in the snapshot: replay the snapshot itself to compare with them."},
            exitCodeListHeading = "%nExit codes:%n",
            exitCodeList = {"0:written", "1:a snapshot that cannot be read", "2:usage error or an output file that cannot be written"})
    static final class Convert implements Callable<Integer> {
        @Spec
        private CommandSpec spec;

        @Option(names = "--device", paramLabel = "N",
                description = "The snapshot's device whose trace to write (needed when it has several).")
        private Integer device;

        @Parameters(index = "0", paramLabel = "SNAPSHOT", description = "The snapshot (or a vmmkit trace) to read.")
        private Path input;

        @Parameters(index = "1", paramLabel = "OUT", description = "The CSV trace to write, e.g. run.csv.gz.")
        private Path output;

        @Override
        public Integer call() {
            PrintWriter err = spec.commandLine().getErr();
            Optional<String> unwritable = new OutputFiles().add("OUT", output).problem();
            if (unwritable.isPresent()) return fail(err, unwritable.get(), VmmkitCli.EXIT_ERROR);
            try {
                List<AllocationTrace> traces = TraceFiles.read(input, device == null ? OptionalInt.empty() : OptionalInt.of(device));
                if (traces.size() != 1) {
                    return fail(err, input.getFileName() + " has " + traces.size() + " device traces; choose one with --device N",
                            VmmkitCli.EXIT_ERROR);
                }
                AllocationTrace trace = traces.getFirst();
                write(trace);
                spec.commandLine().getOut().printf("%s: %,d requests (%,d allocs, %,d frees) written to %s%n",
                        trace.name(), trace.allocs() + trace.frees(), trace.allocs(), trace.frees(), output);
                spec.commandLine().getOut().flush();
                return 0;
            } catch (IOException e) {
                return fail(err, e.getMessage(), 1);
            }
        }

        private void write(AllocationTrace trace) throws IOException {
            LongArrayList cudaFreeSizes = new LongArrayList(); // by ordinal, for their completions
            try (TraceWriter writer = TraceWriter.open(output, "converted from " + trace.name())) {
                for (int op = 0; op < trace.ops(); op++) {
                    long key = trace.key(op);
                    long stream = trace.stream(op);
                    if (trace.kind(op) == AllocationTrace.ALLOC) {
                        writer.alloc(key, trace.size(op), stream);
                        if (trace.waitGaveUp(op)) writer.waitGaveUp(key, trace.size(op), stream);
                    } else if (trace.kind(op) == AllocationTrace.COVER) {
                        writer.freeCompleted(key, cudaFreeSizes.getLong(trace.coveredFree(op)), stream);
                    } else if (stream == AllocationTrace.DEVICE_WIDE_STREAM) {
                        writer.freeRequested(key, trace.size(op), stream);
                        cudaFreeSizes.addLong(trace.size(op));
                    } else {
                        writer.free(key, trace.size(op), stream);
                    }
                }
            }
        }

        private static int fail(PrintWriter err, String message, int exit) {
            err.println("vmmkit trace convert: " + message);
            err.flush();
            return exit;
        }
    }
}
