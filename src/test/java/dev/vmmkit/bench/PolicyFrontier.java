package dev.vmmkit.bench;

import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.driver.DriverKind;
import dev.vmmkit.driver.Drivers;
import dev.vmmkit.tools.replay.ReplayReport;
import dev.vmmkit.tools.replay.ReplayTarget;
import dev.vmmkit.tools.replay.Replayer;
import dev.vmmkit.tools.replay.VmmBackend;
import dev.vmmkit.trace.AllocationTrace;
import dev.vmmkit.trace.TraceReader;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Prints the allocator's ratio/speed frontier on several traces in one JVM (host driver): for each
 * trace, default settings, then with {@code VMM_PEAK_HINT} set to the trace's true peak, then any
 * extra settings given as {@code KEY=VALUE[,KEY=VALUE]} arguments after {@code --}. Columns: ratio,
 * modelled driver us/op (GPU-FACTS per-handle costs, a model), handles created, mapped, unmapped.
 * {@code --default-only} leaves out the hinted run. Ends with a line per setting: how many traces are
 * at or below a ratio of 1.05, the mean and highest ratio, the modelled driver us/op summed over the
 * traces (a rule that moves single classes either way is judged on these), and which are above.
 * Usage: {@code scripts/run-test-class.sh dev.vmmkit.bench.PolicyFrontier [--default-only] TRACE... [-- SETTINGS...]}.
 */
public final class PolicyFrontier {
    /** The fragmentation ratio every trace class should stay at or below. */
    private static final double GOAL = 1.05;

    public static void main(String[] args) throws IOException {
        List<Path> traces = new ArrayList<>();
        List<String> settings = new ArrayList<>();
        settings.add("");
        settings.add("hint");
        boolean extra = false;
        for (String a : args) {
            if (a.equals("--default-only")) {
                settings.remove("hint");
            } else if (a.equals("--")) {
                extra = true;
            } else if (extra) {
                settings.add(a);
            } else {
                traces.add(Path.of(a));
            }
        }
        System.out.printf("%-36s %-34s %7s %8s %7s %7s %7s%n", "trace", "settings", "ratio", "us/op", "create", "map", "unmap");
        Map<String, List<String>> above = new LinkedHashMap<>();
        Map<String, double[]> totals = new HashMap<>(); // per setting: sum of ratios, highest ratio, sum of modelled us/op
        for (String s : settings) {
            above.put(s, new ArrayList<>());
            totals.put(s, new double[3]);
        }
        for (Path file : traces) {
            AllocationTrace trace = TraceReader.read(file);
            for (String s : settings) {
                VmmConfig config = configOf(s, trace);
                ReplayReport r;
                try (VmmBackend backend = new VmmBackend(Drivers.open(DriverKind.HOST, 0, Drivers.WHOLE_DEVICE), config);
                     ReplayTarget target = backend.newTarget()) {
                    r = new Replayer(trace).replay(target);
                }
                var h = r.driverHandles();
                System.out.printf("%-36s %-34s %7.4f %8.2f %7d %7d %7d%n", trace.name(), s.isEmpty() ? "default" : s,
                        r.fragmentationRatio(), r.modelledDriverUsPerOp(), h.create(), h.map(), h.unmap());
                if (r.fragmentationRatio() > GOAL) above.get(s).add(String.format("%s %.4f", trace.name(), r.fragmentationRatio()));
                double[] t = totals.get(s);
                t[0] += r.fragmentationRatio();
                t[1] = Math.max(t[1], r.fragmentationRatio());
                t[2] += r.modelledDriverUsPerOp();
            }
        }
        // The summary the goal is read from: how many classes pass it under each setting.
        for (var e : above.entrySet()) {
            double[] t = totals.get(e.getKey());
            System.out.printf("%s: %d of %d at or below %.2f (mean %.4f, highest %.4f, modelled driver %.2f us/op in sum)%s%n",
                    e.getKey().isEmpty() ? "default" : e.getKey(), traces.size() - e.getValue().size(), traces.size(), GOAL,
                    t[0] / Math.max(1, traces.size()), t[1], t[2],
                    e.getValue().isEmpty() ? "" : "; above: " + String.join(", ", e.getValue()));
        }
    }

    private static VmmConfig configOf(String settings, AllocationTrace trace) {
        Map<String, String> env = new HashMap<>();
        for (String kv : settings.split(",")) {
            if (kv.isBlank()) continue;
            if (kv.equals("hint")) {
                env.put("VMM_PEAK_HINT", Long.toString(trace.peakLiveBytes()));
                continue;
            }
            int eq = kv.indexOf('=');
            env.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        return VmmConfig.from(env);
    }
}
