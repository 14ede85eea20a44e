package dev.vmmkit.lifetime;

import org.junit.jupiter.api.Test;

import java.util.SplittableRandom;
import java.util.function.Function;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Every op's gradient against central finite differences, on the host emulation; and the memory
 * side of autograd: after backward() every intermediate is freed, and a graph dropped without
 * backward() frees everything too.
 */
class GradientCheckTest extends OnTestDevice {
    private static final float EPS = 1e-2f;
    @Test
    void add() {
        check(in -> Ops.add(in[0], in[1]), leaf(1, 3, 4), leaf(2, 3, 4));
    }

    @Test
    void addBroadcastsABiasRow() {
        check(in -> Ops.add(in[0], in[1]), leaf(3, 3, 4), leaf(4, 4));
    }

    @Test
    void addBroadcastsAScalar() {
        check(in -> Ops.add(in[0], in[1]), leaf(5, 2, 3), leaf(6, 1));
    }

    @Test
    void mul() {
        check(in -> Ops.mul(in[0], in[1]), leaf(7, 3, 4), leaf(8, 3, 4));
    }

    @Test
    void mulBroadcastsARow() {
        check(in -> Ops.mul(in[0], in[1]), leaf(9, 3, 4), leaf(10, 4));
    }

    @Test
    void matmul() {
        check(in -> Ops.matmul(in[0], in[1]), leaf(11, 3, 4), leaf(12, 4, 2));
    }

    @Test
    void relu() {
        check(in -> Ops.relu(in[0]), leafAwayFromZero(13, 4, 5));
    }

    @Test
    void sumAndMean() {
        check(in -> Ops.sum(in[0]), leaf(14, 3, 2));
        check(in -> Ops.mean(in[0]), leaf(15, 3, 2));
    }

    @Test
    void softmaxCrossEntropy() {
        try (Tensor labels = device.of(new float[] {0, 2, 1, 2}, 4)) {
            check(in -> Ops.softmaxCrossEntropy(in[0], labels), leaf(16, 4, 3));
        }
    }

    @Test
    void aTwoLayerNetworkWithATensorUsedTwice() {
        try (Tensor x = device.normal(17, 0, 1, 5, 4); Tensor labels = device.of(new float[] {0, 1, 2, 1, 0}, 5)) {
            check(in -> {
                Tensor h = Ops.relu(Ops.add(Ops.matmul(x, in[0]), in[1]));
                Tensor logits = Ops.add(Ops.matmul(h, in[2]), in[3]);
                return Ops.add(Ops.softmaxCrossEntropy(logits, labels), Ops.mean(Ops.mul(in[1], in[1])));
            }, leaf(18, 4, 6), leaf(19, 6), leaf(20, 6, 3), leaf(21, 3));
        }
    }

    @Test
    void afterBackwardEveryIntermediateIsFreed() {
        try (Tensor x = device.normal(30, 0, 1, 8, 4); Tensor labels = device.of(new float[] {0, 1, 2, 0, 1, 2, 0, 1}, 8);
             Tensor w1 = leaf(31, 4, 16); Tensor b1 = leaf(32, 16); Tensor w2 = leaf(33, 16, 3); Tensor b2 = leaf(34, 3)) {
            long baseline = device.liveBytes();
            Tensor loss;
            try (Scope forward = Scope.open()) {
                Tensor h = Ops.relu(Ops.add(Ops.matmul(x, w1), b1));
                loss = Ops.softmaxCrossEntropy(Ops.add(Ops.matmul(h, w2), b2), labels);
                loss.retain(); // kept beyond the scope: acquired
            }
            assertTrue(device.liveBytes() > baseline + 4, "the graph still holds what backward reads");
            loss.backward();
            long grads = w1.byteSize() + b1.byteSize() + w2.byteSize() + b2.byteSize();
            assertEquals(baseline + grads + loss.byteSize(), device.liveBytes(),
                    "only the leaves' gradients and the loss remain");
            assertThrows(IllegalStateException.class, loss::backward);
            loss.release();
            for (Tensor p : new Tensor[] {w1, b1, w2, b2}) {
                assertNotNull(p.grad());
                p.zeroGrad();
            }
            assertEquals(baseline, device.liveBytes());
        }
    }

    @Test
    void aGraphDroppedWithoutBackwardFreesEverything() {
        try (Tensor w = leaf(40, 4, 4)) {
            long baseline = device.liveBytes();
            Tensor loss;
            try (Scope s = Scope.open()) {
                loss = Ops.sum(Ops.relu(Ops.matmul(w, w)));
                loss.retain();
            }
            assertTrue(device.liveBytes() > baseline + loss.byteSize());
            loss.release();
            assertEquals(baseline, device.liveBytes());
            assertEquals(1, w.refCnt(), "the accumulators gave the leaf back");
            assertNull(w.grad());
        }
    }

    @Test
    void noGradRecordsNothing() {
        try (Tensor w = leaf(41, 2, 2); Scope s = Scope.open(); Autograd.NoGrad off = Autograd.noGrad()) {
            Tensor y = Ops.sum(Ops.mul(w, w));
            assertTrue(!y.requiresGrad());
            assertThrows(IllegalStateException.class, y::backward);
        }
    }

    // ------------------------------------------------------------------ the check

    /**
     * Compares backward()'s gradient of {@code sum(f(inputs) * r)} (r fixed random weights) with
     * central differences, element by element; the inputs are released afterwards.
     */
    private void check(Function<Tensor[], Tensor> f, Tensor... inputs) {
        try (Tensor weights = weightsFor(f, inputs)) {
            try (Scope s = Scope.open()) {
                Tensor loss = weighted(f.apply(inputs), weights);
                loss.backward();
            }
            for (int which = 0; which < inputs.length; which++) {
                Tensor input = inputs[which];
                float[] analytic = input.grad().toArray();
                float[] values = input.toArray();
                for (int i = 0; i < values.length; i++) {
                    float original = values[i];
                    values[i] = original + EPS;
                    float plus = evaluate(f, inputs, weights, input, values);
                    values[i] = original - EPS;
                    float minus = evaluate(f, inputs, weights, input, values);
                    values[i] = original;
                    input.copyFrom(values);
                    float numeric = (plus - minus) / (2 * EPS);
                    assertEquals(numeric, analytic[i], 2e-2f * Math.max(1f, Math.abs(numeric)),
                            "gradient of input " + which + " element " + i);
                }
            }
        } finally {
            for (Tensor t : inputs) {
                t.zeroGrad();
                t.release();
            }
        }
    }

    private Tensor weightsFor(Function<Tensor[], Tensor> f, Tensor[] inputs) {
        int[] shape;
        try (Scope s = Scope.open(); Autograd.NoGrad off = Autograd.noGrad()) {
            shape = f.apply(inputs).shape();
        }
        return device.uniform(99, 0.5f, 1.5f, shape);
    }

    private static Tensor weighted(Tensor out, Tensor weights) {
        return Ops.sum(Ops.mul(out, weights));
    }

    private static float evaluate(Function<Tensor[], Tensor> f, Tensor[] inputs, Tensor weights, Tensor input, float[] values) {
        input.copyFrom(values);
        try (Scope s = Scope.open(); Autograd.NoGrad off = Autograd.noGrad()) {
            return weighted(f.apply(inputs), weights).item();
        }
    }

    private Tensor leaf(long seed, int... shape) {
        return device.normal(seed, 0, 1, shape).requiresGrad(true);
    }

    /** Normal values pushed at least 0.1 away from zero, where relu has no derivative. */
    private Tensor leafAwayFromZero(long seed, int... shape) {
        SplittableRandom random = new SplittableRandom(seed);
        float[] values = new float[(int) TensorDevice.elementsOf(shape)];
        for (int i = 0; i < values.length; i++) {
            float v = (float) random.nextDouble(-1, 1);
            values[i] = v + Math.copySign(0.1f, v);
        }
        return device.of(values, shape).requiresGrad(true);
    }
}
