package dev.vmmkit.lifetime;

import dev.vmmkit.driver.DeviceCompute;

/**
 * One {@link DeviceCompute} call each, with a new output tensor: the building blocks of the ops'
 * forward passes and of their gradients. Nothing here checks arguments or records a graph; the
 * callers ({@link Ops}, the grad functions) do. Outputs register in the innermost scope except
 * while backward() runs.
 */
final class Kernels {
    private Kernels() {
    }

    static Tensor empty(TensorDevice device, int[] shape) {
        return device.allocate(shape, Autograd.registersInScopes());
    }

    static Tensor copy(Tensor src) {
        Tensor out = empty(src.device(), src.shape());
        compute(src).copy(out.rawAddress(), src.rawAddress(), src.numel());
        return out;
    }

    /** {@code a + b}, b repeating cyclically over a. */
    static Tensor add(Tensor a, Tensor b) {
        Tensor out = empty(a.device(), a.shape());
        compute(a).add(out.rawAddress(), a.rawAddress(), b.rawAddress(), a.numel(), b.numel());
        return out;
    }

    /** {@code a * b}, b repeating cyclically over a. */
    static Tensor mul(Tensor a, Tensor b) {
        Tensor out = empty(a.device(), a.shape());
        compute(a).mul(out.rawAddress(), a.rawAddress(), b.rawAddress(), a.numel(), b.numel());
        return out;
    }

    static Tensor relu(Tensor a) {
        Tensor out = empty(a.device(), a.shape());
        compute(a).relu(out.rawAddress(), a.rawAddress(), a.numel());
        return out;
    }

    static Tensor reluBackward(Tensor gradOut, Tensor input) {
        Tensor out = empty(input.device(), input.shape());
        compute(input).reluBackward(out.rawAddress(), gradOut.rawAddress(), input.rawAddress(), input.numel());
        return out;
    }

    /** The inverse of cyclic broadcasting: sums {@code g} over its repeats of a {@code shape}-sized block. */
    static Tensor sumRepeats(Tensor g, int[] shape) {
        Tensor out = empty(g.device(), shape);
        long cols = out.numel();
        compute(g).sumRows(out.rawAddress(), g.rawAddress(), cols == 0 ? 0 : g.numel() / cols, cols);
        return out;
    }

    /** {@code alpha * scalar} repeated over {@code shape}. */
    static Tensor broadcast(Tensor scalar, int[] shape, float alpha) {
        Tensor out = empty(scalar.device(), shape);
        compute(scalar).broadcast(out.rawAddress(), scalar.rawAddress(), out.numel(), 1, alpha);
        return out;
    }

    /**
     * {@code op(a) @ op(b)} for 2-D row-major tensors, where op transposes when asked (through
     * strides, without copying).
     */
    static Tensor matmul(Tensor a, boolean transposeA, Tensor b, boolean transposeB) {
        int aRows = a.dim(0), aCols = a.dim(1), bRows = b.dim(0), bCols = b.dim(1);
        int m = transposeA ? aCols : aRows;
        int k = transposeA ? aRows : aCols;
        int n = transposeB ? bRows : bCols;
        Tensor out = empty(a.device(), new int[] {m, n});
        compute(a).matmul(out.rawAddress(), a.rawAddress(), b.rawAddress(), m, n, k,
                transposeA ? 1 : aCols, transposeA ? aCols : 1,
                transposeB ? 1 : bCols, transposeB ? bCols : 1);
        return out;
    }

    static Tensor softmaxCrossEntropy(Tensor logits, Tensor labels) {
        Tensor loss = empty(logits.device(), new int[0]);
        compute(logits).softmaxCrossEntropy(loss.rawAddress(), logits.rawAddress(), labels.rawAddress(),
                logits.dim(0), logits.dim(1));
        return loss;
    }

    static Tensor softmaxCrossEntropyBackward(Tensor gradLoss, Tensor logits, Tensor labels) {
        Tensor out = empty(logits.device(), logits.shape());
        compute(logits).softmaxCrossEntropyBackward(out.rawAddress(), gradLoss.rawAddress(), logits.rawAddress(),
                labels.rawAddress(), logits.dim(0), logits.dim(1));
        return out;
    }

    private static DeviceCompute compute(Tensor t) {
        return t.device().compute();
    }
}
