package dev.vmmkit.tools.demo;

import dev.vmmkit.lifetime.Scope;
import dev.vmmkit.lifetime.Sgd;
import dev.vmmkit.lifetime.Tensor;
import dev.vmmkit.lifetime.TensorDevice;
import dev.vmmkit.tools.Percentiles;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;

/**
 * Trains a {@link TwoLayerMlp} on one synthetic batch and measures what the lifetime layer
 * promises: the loss per step, the live tensor bytes after each step (they must equal the baseline:
 * parameters and data; plain SGD keeps no optimizer state), the peak, the step time, and the leaks
 * found once everything was released and collected.
 */
final class MlpTraining {

    /** The run's shape. */
    record Settings(int batch, int inputs, int hidden, int classes, int steps, float learningRate, long seed) {
    }

    /** What a run measured. */
    record Result(Settings settings, List<Float> losses, List<Long> liveBytesAfterStep, long baselineLiveBytes,
                  long peakLiveBytes, List<Double> stepMillis, long leaks, String leakDetection, StepTime stepTime) {

        boolean lossFell() {
            return losses.size() >= 2 && losses.getLast() < losses.getFirst();
        }

        boolean liveBytesBackToBaseline() {
            return liveBytesAfterStep.stream().allMatch(b -> b == baselineLiveBytes);
        }

        double medianStepMillis() {
            long[] nanos = stepMillis.stream().mapToLong(ms -> Math.round(ms * 1e6)).toArray();
            Percentiles.sort(nanos, nanos.length);
            return Percentiles.nearestRank(nanos, nanos.length, 0.5) / 1e6;
        }
    }

    /**
     * Where a step's time goes, averaged over the steps after the first (which loads the kernels):
     * the host side of kernel launches, waiting for the device (the loss read-back and the final
     * synchronisation), uploads, and the rest (Java: autograd, scopes, the allocator, leak detection).
     */
    record StepTime(double launches, double launchMillis, double waitMillis, double uploadMillis, double restMillis) {
    }

    private MlpTraining() {
    }

    static Result run(TensorDevice device, TimedCompute timing, Settings s, PrintWriter out) {
        SyntheticClasses data = SyntheticClasses.generate(s.batch(), s.inputs(), s.classes(), s.seed());
        List<Float> losses = new ArrayList<>();
        List<Long> liveAfterStep = new ArrayList<>();
        List<Double> stepMillis = new ArrayList<>();
        long baseline;
        long peak;
        StepTime stepTime;
        try (Tensor x = device.of(data.inputs(), s.batch(), s.inputs());
             Tensor labels = device.of(data.labels(), s.batch());
             TwoLayerMlp model = new TwoLayerMlp(device, s.inputs(), s.hidden(), s.classes(), s.seed() + 100);
             Sgd sgd = new Sgd(s.learningRate(), model.parameters())) {
            device.synchronize();
            baseline = device.liveBytes();
            device.resetPeak();
            TimedCompute.Totals afterFirstStep = null;
            long firstStepEnd = 0;
            for (int step = 0; step < s.steps(); step++) {
                long start = System.nanoTime();
                float loss;
                try (Scope scope = Scope.open()) {
                    Tensor l = model.loss(x, labels);
                    loss = l.item();
                    l.backward();
                }
                sgd.step();
                device.synchronize();
                stepMillis.add((System.nanoTime() - start) / 1e6);
                losses.add(loss);
                liveAfterStep.add(device.liveBytes());
                out.printf("step %d loss %.6f live_bytes %d%n", step, loss, device.liveBytes());
                out.flush();
                if (step == 0) {
                    afterFirstStep = timing.totals();
                    firstStepEnd = System.nanoTime();
                }
            }
            stepTime = stepTime(timing.totals().minus(afterFirstStep), System.nanoTime() - firstStepEnd, s.steps() - 1);
            peak = device.peakLiveBytes();
        }
        long leaks = device.leakDetector().collectAndCheck();
        return new Result(s, losses, liveAfterStep, baseline, peak, stepMillis, leaks,
                device.leakDetector().level().name().toLowerCase(java.util.Locale.ROOT), stepTime);
    }

    private static StepTime stepTime(TimedCompute.Totals t, long wallNanos, int steps) {
        if (steps <= 0) return new StepTime(0, 0, 0, 0, 0);
        double launch = t.launchNanos() / 1e6 / steps;
        double wait = t.waitNanos() / 1e6 / steps;
        double upload = t.uploadNanos() / 1e6 / steps;
        double rest = wallNanos / 1e6 / steps - launch - wait - upload;
        return new StepTime((double) t.launches() / steps, launch, wait, upload, rest);
    }
}
