package dev.vmmkit.lifetime;

import dev.vmmkit.compute.DeviceCompute;

/**
 * One {@link DeviceCompute} call each, into a new output tensor: the building blocks of the leaf
 * factories, the ops' forward passes and their gradients. Nothing here checks arguments or records
 * a graph; the callers ({@link Ops}, the grad functions, {@link TensorDevice}) do. Outputs register
 * in the innermost scope except while backward() runs, and a kernel that fails leaves no output
 * behind.
 */
final class Kernels {
    private Kernels() {
    }

    /** Writes a new tensor's elements, given the device's kernels and the tensor's address. */
    @FunctionalInterface
    interface Writer {
        void write(DeviceCompute compute, long out);
    }

    /** A new tensor of {@code shape} written by {@code writer}; freed again if the writer fails. */
    static Tensor make(TensorDevice device, int[] shape, Writer writer) {
        Tensor out = device.allocate(shape, Autograd.registersInScopes());
        if (out.numel() == 0) return out;
        try {
            writer.write(device.compute(), out.rawAddress());
        } catch (RuntimeException e) {
            out.close();
            throw e;
        }
        return out;
    }

    static Tensor copy(Tensor src) {
        return make(src.device(), src.shape(), (k, out) -> k.copy(out, src.rawAddress(), src.numel()));
    }

    /** {@code a + b}, b repeating cyclically over a. */
    static Tensor add(Tensor a, Tensor b) {
        return make(a.device(), a.shape(), (k, out) -> k.add(out, a.rawAddress(), b.rawAddress(), a.numel(), b.numel()));
    }

    /** {@code a * b}, b repeating cyclically over a. */
    static Tensor mul(Tensor a, Tensor b) {
        return make(a.device(), a.shape(), (k, out) -> k.mul(out, a.rawAddress(), b.rawAddress(), a.numel(), b.numel()));
    }

    static Tensor relu(Tensor a) {
        return make(a.device(), a.shape(), (k, out) -> k.relu(out, a.rawAddress(), a.numel()));
    }

    static Tensor reluBackward(Tensor gradOut, Tensor input) {
        return make(input.device(), input.shape(),
                (k, out) -> k.reluBackward(out, gradOut.rawAddress(), input.rawAddress(), input.numel()));
    }

    /** The inverse of cyclic broadcasting: sums {@code g} over its repeats of a {@code shape}-sized block. */
    static Tensor sumRepeats(Tensor g, int[] shape) {
        long cols = TensorDevice.elementsOf(shape);
        return make(g.device(), shape, (k, out) -> k.sumRows(out, g.rawAddress(), g.numel() / cols, cols));
    }

    /** {@code scale * sum of all elements}, shape {@code []}. */
    static Tensor scaledSum(Tensor a, float scale) {
        return make(a.device(), new int[0], (k, out) -> {
            k.sumRows(out, a.rawAddress(), a.numel(), 1);
            if (scale != 1f) k.broadcast(out, out, 1, 1, scale);
        });
    }

    /** {@code alpha * scalar} repeated over {@code shape}. */
    static Tensor broadcast(Tensor scalar, int[] shape, float alpha) {
        return make(scalar.device(), shape, (k, out) -> k.broadcast(out, scalar.rawAddress(), TensorDevice.elementsOf(shape), 1, alpha));
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
        return make(a.device(), new int[] {m, n}, (compute, out) -> compute.matmul(out, a.rawAddress(), b.rawAddress(),
                m, n, k, transposeA ? 1 : aCols, transposeA ? aCols : 1, transposeB ? 1 : bCols, transposeB ? bCols : 1));
    }

    static Tensor softmaxCrossEntropy(Tensor logits, Tensor labels) {
        return make(logits.device(), new int[0], (k, out) -> k.softmaxCrossEntropy(out, logits.rawAddress(),
                labels.rawAddress(), logits.dim(0), logits.dim(1)));
    }

    static Tensor softmaxCrossEntropyBackward(Tensor gradLoss, Tensor logits, Tensor labels) {
        return make(logits.device(), logits.shape(), (k, out) -> k.softmaxCrossEntropyBackward(out, gradLoss.rawAddress(),
                logits.rawAddress(), labels.rawAddress(), logits.dim(0), logits.dim(1)));
    }
}
