package dev.vmmkit.lifetime;

import java.util.Arrays;

/**
 * The tensor operations: each checks its arguments (alive, same device, shapes), makes a new tensor
 * in the innermost scope, and, when an input requires a gradient and this thread records (not in
 * {@link Autograd#noGrad()}), gives the result a grad function. Arguments are borrowed: no op
 * changes their counts, except that a grad function keeps its own references to what its backward
 * pass reads.
 *
 * <p>Broadcasting is limited to what a dense layer needs: in {@code add} and {@code mul}, {@code b}
 * may have {@code a}'s shape, a suffix of it (a bias row over the rows of a matrix), or one element.
 */
public final class Ops {
    private Ops() {
    }

    /** {@code a + b}, b broadcast over a. */
    public static Tensor add(Tensor a, Tensor b) {
        checkBroadcast("add", a, b);
        Tensor out = Kernels.add(a, b);
        if (tracks(a, b)) out.gradFn(new Backward.Add(edges(a, b), a, b));
        return out;
    }

    /** {@code a * b} elementwise, b broadcast over a. */
    public static Tensor mul(Tensor a, Tensor b) {
        checkBroadcast("mul", a, b);
        Tensor out = Kernels.mul(a, b);
        if (tracks(a, b)) out.gradFn(new Backward.Mul(edges(a, b), a, b));
        return out;
    }

    /** Matrix product of {@code [m, k]} and {@code [k, n]}. */
    public static Tensor matmul(Tensor a, Tensor b) {
        use("matmul", a, b);
        if (a.rank() != 2 || b.rank() != 2 || a.dim(1) != b.dim(0)) {
            throw new IllegalArgumentException("matmul: shapes " + Arrays.toString(a.shape()) + " and "
                    + Arrays.toString(b.shape()) + " do not multiply (need [m, k] and [k, n])");
        }
        Tensor out = Kernels.matmul(a, false, b, false);
        if (tracks(a, b)) out.gradFn(new Backward.Matmul(edges(a, b), a, b));
        return out;
    }

    /** {@code max(a, 0)} elementwise. */
    public static Tensor relu(Tensor a) {
        use("relu", a);
        Tensor out = Kernels.relu(a);
        if (tracks(a)) out.gradFn(new Backward.Relu(edges(a), a));
        return out;
    }

    /** The sum of all elements, as a one-element tensor of shape {@code []}. */
    public static Tensor sum(Tensor a) {
        return reduce("sum", a, 1f);
    }

    /** The mean of all elements, as a one-element tensor of shape {@code []}. */
    public static Tensor mean(Tensor a) {
        if (a.numel() == 0) throw new IllegalArgumentException("mean of " + a.describe() + ", which has no elements");
        return reduce("mean", a, 1f / a.numel());
    }

    /**
     * Mean over rows of the cross-entropy of softmax(logits row) against the class in {@code labels}:
     * logits {@code [rows, classes]}, labels {@code [rows]} holding class indices as whole floats.
     * A label outside {@code [0, classes)} gives NaN. Labels get no gradient.
     */
    public static Tensor softmaxCrossEntropy(Tensor logits, Tensor labels) {
        use("softmaxCrossEntropy", logits, labels);
        if (logits.rank() != 2 || labels.rank() != 1 || labels.dim(0) != logits.dim(0)) {
            throw new IllegalArgumentException("softmaxCrossEntropy: logits " + Arrays.toString(logits.shape())
                    + " and labels " + Arrays.toString(labels.shape()) + " (need [rows, classes] and [rows])");
        }
        if (logits.dim(0) == 0) throw new IllegalArgumentException("softmaxCrossEntropy of zero rows");
        Tensor loss = Kernels.softmaxCrossEntropy(logits, labels);
        if (tracks(logits)) {
            loss.gradFn(new Backward.SoftmaxCrossEntropy(new GradFn[] {GradFn.edgeOf(logits), null}, logits, labels));
        }
        return loss;
    }

    /**
     * Stochastic gradient descent in place: {@code param -= learningRate * param.grad()}. Records
     * nothing. Does nothing when the parameter has no gradient.
     */
    public static void sgdStep(Tensor param, float learningRate) {
        use("sgdStep", param);
        Tensor grad = param.grad();
        if (grad == null) return;
        grad.checkAlive("sgdStep");
        param.device().compute().axpy(param.rawAddress(), grad.rawAddress(), param.numel(), -learningRate);
    }

    private static Tensor reduce(String name, Tensor a, float scale) {
        use(name, a);
        Tensor out = Kernels.scaledSum(a, scale);
        if (tracks(a)) out.gradFn(new Backward.Sum(edges(a), a, scale, name + "Backward"));
        return out;
    }

    private static void checkBroadcast(String op, Tensor a, Tensor b) {
        use(op, a, b);
        int[] as = a.shape(), bs = b.shape();
        boolean suffix = bs.length <= as.length
                && Arrays.equals(bs, Arrays.copyOfRange(as, as.length - bs.length, as.length));
        if (!suffix && b.numel() != 1) {
            throw new IllegalArgumentException(op + ": " + Arrays.toString(bs) + " does not broadcast over "
                    + Arrays.toString(as) + " (b must have a's shape, a suffix of it, or one element)");
        }
    }

    /** Checks each input is alive and on the first one's device, and notes the use for leak reports. */
    private static void use(String op, Tensor... inputs) {
        for (Tensor t : inputs) {
            t.checkAlive(op);
            if (t.device() != inputs[0].device()) {
                throw new IllegalArgumentException(op + ": tensors on different devices");
            }
            t.touch(op);
        }
    }

    private static boolean tracks(Tensor... inputs) {
        if (!Autograd.recording()) return false;
        for (Tensor t : inputs) if (t.requiresGrad()) return true;
        return false;
    }

    private static GradFn[] edges(Tensor... inputs) {
        GradFn[] next = new GradFn[inputs.length];
        for (int i = 0; i < inputs.length; i++) next[i] = GradFn.edgeOf(inputs[i]);
        return next;
    }
}
