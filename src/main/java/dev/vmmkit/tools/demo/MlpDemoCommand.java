package dev.vmmkit.tools.demo;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.vmmkit.core.AllocatorStats;
import dev.vmmkit.tools.DriverOptions;
import dev.vmmkit.tools.OutputFiles;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * {@code vmmkit demo mlp}: trains a two-layer MLP on a synthetic batch with reference-counted
 * tensors and prints the loss per step, then a verdict: the loss fell, live bytes came back exactly
 * to the baseline after every step, no leak. Exit 0 when all three hold, 1 otherwise.
 */
@Command(name = "mlp", mixinStandardHelpOptions = true,
        description = "Train a two-layer MLP on synthetic data; check the loss falls and memory returns to baseline.")
public final class MlpDemoCommand implements Callable<Integer> {
    private static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

    @Spec
    private CommandSpec spec;

    @Mixin
    private DriverOptions driverOptions;

    @Option(names = "--steps", defaultValue = "30", paramLabel = "N", description = "Training steps. Default: ${DEFAULT-VALUE}.")
    private int steps;

    @Option(names = "--batch", defaultValue = "256", description = "Batch size. Default: ${DEFAULT-VALUE}.")
    private int batch;

    @Option(names = "--inputs", defaultValue = "128", description = "Input features. Default: ${DEFAULT-VALUE}.")
    private int inputs;

    @Option(names = "--hidden", defaultValue = "512", description = "Hidden units. Default: ${DEFAULT-VALUE}.")
    private int hidden;

    @Option(names = "--classes", defaultValue = "10", description = "Classes. Default: ${DEFAULT-VALUE}.")
    private int classes;

    @Option(names = "--lr", defaultValue = "0.1", description = "SGD learning rate. Default: ${DEFAULT-VALUE}.")
    private float learningRate;

    @Option(names = "--seed", defaultValue = "1", description = "Seed of data and weights. Default: ${DEFAULT-VALUE}.")
    private long seed;

    @Option(names = "--json", paramLabel = "FILE", description = "Write the measurements as JSON to FILE.")
    private Path json;

    /** Each bad option is named alone; an output file that cannot be written stops the demo before it trains. */
    private void checkOptions() {
        CommandLine commandLine = spec.commandLine();
        for (var option : new Object[][] {{"--steps", steps, 1}, {"--batch", batch, 1}, {"--inputs", inputs, 1},
                {"--hidden", hidden, 1}, {"--classes", classes, 2}}) {
            if ((int) option[1] < (int) option[2]) {
                throw new CommandLine.ParameterException(commandLine, option[0] + " must be at least " + option[2] + ", not " + option[1]);
            }
        }
        new OutputFiles().add("--json", json).problem().ifPresent(problem -> {
            throw new CommandLine.ParameterException(commandLine, problem);
        });
    }

    @Override
    public Integer call() throws IOException {
        PrintWriter out = spec.commandLine().getOut();
        checkOptions();
        MlpTraining.Settings settings = new MlpTraining.Settings(batch, inputs, hidden, classes, steps, learningRate, seed);
        DemoDevice.Opened opened = DemoDevice.open(driverOptions.open());
        MlpTraining.Result result;
        AllocatorStats allocator;
        try (var tensors = opened.device()) {
            out.printf("driver %s, batch %d, %d -> %d -> %d, %d steps, lr %s, leak detection %s%n",
                    opened.driver().name(), batch, inputs, hidden, classes, steps, learningRate,
                    tensors.leakDetector().level().name().toLowerCase(java.util.Locale.ROOT));
            result = MlpTraining.run(tensors, opened.timing(), settings, out);
            allocator = opened.manager().stats();
        }
        boolean ok = result.lossFell() && result.liveBytesBackToBaseline() && result.leaks() == 0;
        out.printf("baseline_live_bytes %d, peak_live_bytes %d, median step %.3f ms, leaks %d%n",
                result.baselineLiveBytes(), result.peakLiveBytes(), result.medianStepMillis(), result.leaks());
        MlpTraining.StepTime t = result.stepTime();
        out.printf("per step: %.0f kernel launches taking %.3f ms on the host, %.3f ms waiting for the device, "
                + "%.3f ms uploads, %.3f ms the rest (Java: autograd, scopes, allocator, leak detection)%n",
                t.launches(), t.launchMillis(), t.waitMillis(), t.uploadMillis(), t.restMillis());
        out.printf("%s: loss %s (%.6f -> %.6f), live bytes %s, %s%n", ok ? "OK" : "FAILED",
                result.lossFell() ? "fell" : "did NOT fall", result.losses().getFirst(), result.losses().getLast(),
                result.liveBytesBackToBaseline() ? "back to baseline after every step" : "NOT back to baseline",
                result.leaks() == 0 ? "no leak" : result.leaks() + " leak(s)");
        if (json != null) JSON.writeValue(json.toFile(), report(opened.driver().name(), result, allocator));
        out.flush();
        return ok ? 0 : 1;
    }

    private static Map<String, Object> report(String driver, MlpTraining.Result r, AllocatorStats allocator) {
        Map<String, Object> report = new LinkedHashMap<>();
        MlpTraining.Settings s = r.settings();
        report.put("driver", driver);
        report.put("batch", s.batch());
        report.put("inputs", s.inputs());
        report.put("hidden", s.hidden());
        report.put("classes", s.classes());
        report.put("steps", s.steps());
        report.put("learning_rate", s.learningRate());
        report.put("seed", s.seed());
        report.put("leak_detection", r.leakDetection());
        report.put("losses", r.losses());
        report.put("live_bytes_after_step", r.liveBytesAfterStep());
        report.put("baseline_live_bytes", r.baselineLiveBytes());
        report.put("peak_live_bytes", r.peakLiveBytes());
        report.put("leaks", r.leaks());
        report.put("step_ms", r.stepMillis());
        report.put("median_step_ms", r.medianStepMillis());
        MlpTraining.StepTime t = r.stepTime();
        Map<String, Object> time = new LinkedHashMap<>();
        time.put("kernel_launches", t.launches());
        time.put("launch_ms", t.launchMillis());
        time.put("wait_for_device_ms", t.waitMillis());
        time.put("upload_ms", t.uploadMillis());
        time.put("rest_ms", t.restMillis());
        report.put("time_per_step", time);
        report.put("allocator_peak_live_bytes", allocator.peakLiveBytes());
        report.put("allocator_peak_reserved_bytes", allocator.peakReservedBytes());
        report.put("ok", r.lossFell() && r.liveBytesBackToBaseline() && r.leaks() == 0);
        return report;
    }
}
