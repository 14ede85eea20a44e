package dev.vmmkit.tools.demo;

import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.compute.DeviceCompute;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;

/**
 * Runs every {@link DeviceCompute} kernel on the same random inputs on two devices, a reference
 * (the host emulation) and a target (CUDA), and compares the outputs element by element. Each case
 * ends in one line that says, on failure, enough to fix the kernel without a debugger: the launch
 * error, or the worst element with its index, both values, and the first elements of each output.
 */
final class OpsCheck {
    /** Absolute plus relative tolerance: float32 with approximate exp/log on the device. */
    private static final float ABS_TOL = 5e-4f;
    private static final float REL_TOL = 1e-3f;
    private static final int SHOWN = 6;

    /** One device: its memory and its kernels. */
    record Side(String name, DeviceMemoryResource memory, DeviceCompute compute) {
    }

    /** The outcome of one case. */
    record Outcome(String name, boolean passed, String line) {
    }

    /** Builds a case's inputs on a device, runs the kernel, returns the output address and length. */
    @FunctionalInterface
    private interface Kernel {
        void run(DeviceCompute compute, long[] in, long out);
    }

    private record Case(String name, float[][] inputs, int outputLength, Kernel kernel) {
    }

    private OpsCheck() {
    }

    static List<Outcome> run(Side reference, Side target) {
        List<Outcome> outcomes = new ArrayList<>();
        for (Case c : cases(new SplittableRandom(7))) {
            outcomes.add(check(c, reference, target));
        }
        return outcomes;
    }

    private static Outcome check(Case c, Side reference, Side target) {
        float[] expected;
        try {
            expected = execute(c, reference);
        } catch (RuntimeException e) {
            return new Outcome(c.name(), false, "FAIL " + c.name() + ": reference (" + reference.name() + ") failed: " + e);
        }
        float[] actual;
        try {
            actual = execute(c, target);
        } catch (RuntimeException e) {
            return new Outcome(c.name(), false, "FAIL " + c.name() + ": " + target.name() + " failed: " + e.getMessage()
                    + " [" + e.getClass().getSimpleName() + "]");
        }
        int worst = -1;
        float worstExcess = 0;
        for (int i = 0; i < expected.length; i++) {
            float e = expected[i], a = actual[i];
            if (Float.isNaN(e) && Float.isNaN(a)) continue;
            float excess = Math.abs(e - a) - (ABS_TOL + REL_TOL * Math.abs(e));
            if (Float.isNaN(excess) || excess > worstExcess || (worst < 0 && excess > 0)) {
                worst = i;
                worstExcess = Float.isNaN(excess) ? Float.POSITIVE_INFINITY : excess;
            }
        }
        double maxDiff = 0;
        for (int i = 0; i < expected.length; i++) {
            if (!(Float.isNaN(expected[i]) && Float.isNaN(actual[i]))) maxDiff = Math.max(maxDiff, Math.abs(expected[i] - actual[i]));
        }
        if (worst < 0) {
            return new Outcome(c.name(), true, String.format("PASS %s: %d elements, max |diff| %.3g", c.name(), expected.length, maxDiff));
        }
        return new Outcome(c.name(), false, String.format(
                "FAIL %s: element %d of %d: expected %s (%s), got %s (%s); max |diff| %.3g; expected starts %s, got %s",
                c.name(), worst, expected.length, expected[worst], reference.name(), actual[worst], target.name(), maxDiff,
                head(expected), head(actual)));
    }

    private static String head(float[] values) {
        return Arrays.toString(Arrays.copyOf(values, Math.min(SHOWN, values.length)));
    }

    /** Copies the inputs to fresh device memory, runs the kernel, reads the output back, frees all. */
    private static float[] execute(Case c, Side side) {
        long[] in = new long[c.inputs().length];
        long out = 0;
        try {
            for (int i = 0; i < in.length; i++) {
                in[i] = side.memory().allocate(4L * c.inputs()[i].length, 0);
                side.compute().copyFromHost(in[i], c.inputs()[i]);
            }
            out = side.memory().allocate(4L * c.outputLength(), 0);
            side.compute().fill(out, c.outputLength(), -7.25f); // a kernel that writes nothing shows
            c.kernel().run(side.compute(), in, out);
            side.compute().synchronize();
            float[] result = new float[c.outputLength()];
            side.compute().copyToHost(result, out);
            return result;
        } finally {
            for (long address : in) if (address != 0) side.memory().deallocate(address, 0);
            if (out != 0) side.memory().deallocate(out, 0);
        }
    }

    private static List<Case> cases(SplittableRandom random) {
        List<Case> cases = new ArrayList<>();
        cases.add(new Case("fill n=1000 value=3.5", new float[0][], 1000, (k, in, out) -> k.fill(out, 1000, 3.5f)));
        cases.add(new Case("copy n=1000", new float[][] {values(random, 1000)}, 1000, (k, in, out) -> k.copy(out, in[0], 1000)));
        for (int[] shape : new int[][] {{1000, 1000}, {1200, 40}, {300, 1}}) {
            int n = shape[0], bn = shape[1];
            float[][] ab = {values(random, n), values(random, bn)};
            cases.add(new Case("add n=" + n + " bCount=" + bn, ab, n, (k, in, out) -> k.add(out, in[0], in[1], n, bn)));
            cases.add(new Case("mul n=" + n + " bCount=" + bn, ab, n, (k, in, out) -> k.mul(out, in[0], in[1], n, bn)));
        }
        cases.add(new Case("axpy n=1000 alpha=-0.3 (y += alpha*x, in place)", new float[][] {values(random, 1000), values(random, 1000)},
                1000, (k, in, out) -> {
                    k.copy(out, in[0], 1000);
                    k.axpy(out, in[1], 1000, -0.3f);
                }));
        cases.add(new Case("broadcast n=1000 srcCount=1 alpha=0.5", new float[][] {values(random, 1)}, 1000,
                (k, in, out) -> k.broadcast(out, in[0], 1000, 1, 0.5f)));
        cases.add(new Case("broadcast n=600 srcCount=60 alpha=-2", new float[][] {values(random, 60)}, 600,
                (k, in, out) -> k.broadcast(out, in[0], 600, 60, -2f)));
        cases.add(new Case("relu n=1000", new float[][] {values(random, 1000)}, 1000, (k, in, out) -> k.relu(out, in[0], 1000)));
        cases.add(new Case("reluBackward n=1000", new float[][] {values(random, 1000), values(random, 1000)}, 1000,
                (k, in, out) -> k.reluBackward(out, in[0], in[1], 1000)));
        cases.add(new Case("sumRows rows=37 cols=300", new float[][] {values(random, 37 * 300)}, 300,
                (k, in, out) -> k.sumRows(out, in[0], 37, 300)));
        cases.add(new Case("sumRows rows=1000 cols=1", new float[][] {values(random, 1000)}, 1,
                (k, in, out) -> k.sumRows(out, in[0], 1000, 1)));
        addMatmul(cases, random, 33, 17, 45, false, false);
        addMatmul(cases, random, 33, 17, 45, true, false);
        addMatmul(cases, random, 33, 17, 45, false, true);
        addMatmul(cases, random, 256, 512, 128, false, false);
        int rows = 70, cols = 10;
        float[] logits = values(random, rows * cols);
        float[] labels = new float[rows];
        for (int i = 0; i < rows; i++) labels[i] = random.nextInt(cols);
        cases.add(new Case("softmaxCrossEntropy rows=70 cols=10", new float[][] {logits, labels}, 1,
                (k, in, out) -> k.softmaxCrossEntropy(out, in[0], in[1], rows, cols)));
        float[] badLabels = labels.clone();
        badLabels[3] = cols; // out of range: the loss must be NaN on both
        cases.add(new Case("softmaxCrossEntropy with label out of range (NaN expected)", new float[][] {logits, badLabels}, 1,
                (k, in, out) -> k.softmaxCrossEntropy(out, in[0], in[1], rows, cols)));
        cases.add(new Case("softmaxCrossEntropyBackward rows=70 cols=10 gradLoss=0.7",
                new float[][] {logits, labels, {0.7f}}, rows * cols,
                (k, in, out) -> k.softmaxCrossEntropyBackward(out, in[2], in[0], in[1], rows, cols)));
        return cases;
    }

    private static void addMatmul(List<Case> cases, SplittableRandom random, int m, int n, int k,
                                  boolean transposeA, boolean transposeB) {
        // a is stored [m, k] or, transposed, [k, m]; b is [k, n] or [n, k].
        float[][] ab = {values(random, m * k), values(random, k * n)};
        String name = "matmul m=" + m + " n=" + n + " k=" + k + (transposeA ? " a transposed" : "") + (transposeB ? " b transposed" : "");
        cases.add(new Case(name, ab, m * n, (c, in, out) -> c.matmul(out, in[0], in[1], m, n, k,
                transposeA ? 1 : k, transposeA ? m : 1, transposeB ? 1 : n, transposeB ? k : 1)));
    }

    private static float[] values(SplittableRandom random, int n) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) v[i] = (float) (random.nextDouble() * 4 - 2);
        return v;
    }
}
