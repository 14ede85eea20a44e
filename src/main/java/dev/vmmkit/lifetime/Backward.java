package dev.vmmkit.lifetime;

/**
 * The grad function of each op. Each saves only the inputs its backward pass reads, and gives each
 * back as soon as the rest of the pass no longer needs it, so memory falls as early as it can
 * (matmul computes the gradient that reads its first input, releases that input, then the other).
 */
final class Backward {
    private Backward() {
    }

    /** {@code a + b} (b cyclic): the gradient passes through; b's is summed over its repeats. */
    static final class Add extends GradFn {
        private final int[] bShape;
        private final boolean bBroadcast;

        Add(GradFn[] next, Tensor a, Tensor b) {
            super(next);
            this.bShape = b.shape();
            this.bBroadcast = b.numel() != a.numel();
        }

        @Override
        String name() {
            return "AddBackward";
        }

        @Override
        void computeGrads(Tensor g, Tensor[] grads) {
            if (next[0] != null) grads[0] = (Tensor) g.retain();
            if (next[1] != null) grads[1] = bBroadcast ? Kernels.sumRepeats(g, bShape) : (Tensor) g.retain();
        }
    }

    /** {@code a * b} (b cyclic): ga = g * b, gb = sum of repeats of g * a. */
    static final class Mul extends GradFn {
        private final int[] bShape;
        private final boolean bBroadcast;

        Mul(GradFn[] next, Tensor a, Tensor b) {
            super(next, a, b);
            this.bShape = b.shape();
            this.bBroadcast = b.numel() != a.numel();
        }

        @Override
        String name() {
            return "MulBackward";
        }

        @Override
        void computeGrads(Tensor g, Tensor[] grads) {
            if (next[1] != null) {
                Tensor product = Kernels.mul(g, saved(0));
                if (bBroadcast) {
                    try {
                        grads[1] = Kernels.sumRepeats(product, bShape);
                    } finally {
                        product.release();
                    }
                } else {
                    grads[1] = product;
                }
            }
            releaseSaved(0);
            if (next[0] != null) grads[0] = Kernels.mul(g, saved(1));
            releaseSaved(1);
        }
    }

    /** {@code a @ b}: gb = a^T @ g, ga = g @ b^T. */
    static final class Matmul extends GradFn {
        Matmul(GradFn[] next, Tensor a, Tensor b) {
            super(next, a, b);
        }

        @Override
        String name() {
            return "MatmulBackward";
        }

        @Override
        void computeGrads(Tensor g, Tensor[] grads) {
            if (next[1] != null) grads[1] = Kernels.matmul(saved(0), true, g, false);
            releaseSaved(0);
            if (next[0] != null) grads[0] = Kernels.matmul(g, false, saved(1), true);
            releaseSaved(1);
        }
    }

    /** {@code relu(a)}: the gradient where a was positive. */
    static final class Relu extends GradFn {
        Relu(GradFn[] next, Tensor a) {
            super(next, a);
        }

        @Override
        String name() {
            return "ReluBackward";
        }

        @Override
        void computeGrads(Tensor g, Tensor[] grads) {
            grads[0] = Kernels.reluBackward(g, saved(0));
        }
    }

    /** {@code sum(a) * scale} (scale 1 for sum, 1/n for mean): the gradient repeated over a's shape. */
    static final class Sum extends GradFn {
        private final int[] shape;
        private final float scale;
        private final String name;

        Sum(GradFn[] next, Tensor a, float scale, String name) {
            super(next);
            this.shape = a.shape();
            this.scale = scale;
            this.name = name;
        }

        @Override
        String name() {
            return name;
        }

        @Override
        void computeGrads(Tensor g, Tensor[] grads) {
            grads[0] = Kernels.broadcast(g, shape, scale);
        }
    }

    /** Mean softmax cross-entropy: (softmax(logits) - onehot) * g / rows, recomputed from the logits. */
    static final class SoftmaxCrossEntropy extends GradFn {
        SoftmaxCrossEntropy(GradFn[] next, Tensor logits, Tensor labels) {
            super(next, logits, labels);
        }

        @Override
        String name() {
            return "SoftmaxCrossEntropyBackward";
        }

        @Override
        void computeGrads(Tensor g, Tensor[] grads) {
            grads[0] = Kernels.softmaxCrossEntropyBackward(g, saved(0), saved(1));
        }
    }
}
