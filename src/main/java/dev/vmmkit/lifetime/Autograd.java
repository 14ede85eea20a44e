package dev.vmmkit.lifetime;

import java.util.ArrayDeque;
import java.util.Comparator;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.PriorityQueue;

/**
 * The backward pass, and the per-thread modes that say whether ops record a graph.
 *
 * <p>backward() runs the graph's nodes from the loss down, latest op first (as PyTorch does). Each
 * node gets the sum of the gradients of its output, computes its inputs' gradients, then at once
 * releases that gradient and its own saved tensors, so an intermediate that nothing else holds is
 * freed as soon as the last node reading it has run. At the end the loss drops its grad function and
 * with it the rest of the graph. Gradients made during the pass belong to no scope: the leaves own
 * theirs.
 */
public final class Autograd {
    /** Per thread: how many noGrad() regions are open, and whether backward() is running. */
    private static final ThreadLocal<int[]> NO_GRAD_DEPTH = ThreadLocal.withInitial(() -> new int[1]);
    private static final ThreadLocal<boolean[]> IN_BACKWARD = ThreadLocal.withInitial(() -> new boolean[1]);

    private Autograd() {
    }

    /** A region opened by {@link #noGrad()}; closing it throws nothing. */
    public interface NoGrad extends AutoCloseable {
        @Override
        void close();
    }

    /** A region (try-with-resources) in which ops on this thread record no graph. */
    public static NoGrad noGrad() {
        int[] depth = NO_GRAD_DEPTH.get();
        depth[0]++;
        return new NoGrad() {
            private boolean closed;

            @Override
            public void close() {
                if (!closed) {
                    closed = true;
                    depth[0]--;
                }
            }
        };
    }

    /** True when ops on this thread record grad functions. */
    static boolean recording() {
        return NO_GRAD_DEPTH.get()[0] == 0 && !IN_BACKWARD.get()[0];
    }

    /** False while backward() runs: the gradients it makes belong to no scope. */
    static boolean registersInScopes() {
        return !IN_BACKWARD.get()[0];
    }

    static void backward(Tensor root) {
        if (root.numel() != 1) {
            throw new IllegalStateException("backward() needs a one-element tensor (a loss); " + root.describe()
                    + " has " + root.numel() + " elements");
        }
        if (root.graphFreed()) {
            throw new IllegalStateException("backward() already ran through " + root.describe() + "; its graph was freed");
        }
        if (!root.requiresGrad()) {
            throw new IllegalStateException("backward(): " + root.describe()
                    + " does not require a gradient (no input of the ops that made it requires one)");
        }
        boolean[] inBackward = IN_BACKWARD.get();
        if (inBackward[0]) throw new IllegalStateException("backward() called while backward() runs on this thread");
        inBackward[0] = true;
        GradFn top = root.gradFn() != null ? root.gradFn() : new AccumulateGrad(root);
        Map<GradFn, Tensor> pending = new IdentityHashMap<>();
        try {
            pending.put(top, root.device().full(1f, root.shape()));
            run(top, pending);
        } finally {
            for (Tensor g : pending.values()) g.release();
            inBackward[0] = false;
            GradFn graph = root.takeGradFn();
            if (graph == null) top.releaseNode(); // the accumulator made for a leaf root
            else graph.releaseNode();
        }
    }

    private static void run(GradFn top, Map<GradFn, Tensor> pending) {
        Map<GradFn, Integer> dependencies = countDependencies(top);
        PriorityQueue<GradFn> ready = new PriorityQueue<>(Comparator.comparingLong((GradFn fn) -> fn.sequence).reversed());
        ready.add(top);
        while (!ready.isEmpty()) {
            GradFn fn = ready.poll();
            Tensor gradOutput = pending.remove(fn);
            Tensor[] grads;
            try {
                grads = fn.apply(gradOutput);
            } finally {
                gradOutput.release();
                fn.releaseAllSaved();
            }
            try {
                for (int i = 0; i < fn.next.length; i++) {
                    GradFn target = fn.next[i];
                    Tensor grad = grads[i];
                    grads[i] = null;
                    try {
                        if (grad != null && target != null) {
                            Tensor sum = pending.get(target);
                            if (sum == null) {
                                pending.put(target, grad);
                            } else {
                                pending.put(target, Kernels.add(sum, grad)); // pending now owns the total
                                sum.release();
                                grad.release();
                            }
                            grad = null;
                        }
                    } finally {
                        if (grad != null) grad.release(); // not needed, or the sum failed
                    }
                    if (target != null && dependencies.merge(target, -1, Integer::sum) == 0) {
                        if (!pending.containsKey(target)) {
                            throw new IllegalStateException(fn.name() + " gave no gradient to " + target.name());
                        }
                        ready.add(target);
                    }
                }
            } catch (RuntimeException e) {
                for (Tensor rest : grads) if (rest != null) rest.release(); // gradients not yet handed on
                throw e;
            }
        }
    }

    /** For each node reachable from {@code top}: how many edges of reachable nodes lead to it. */
    private static Map<GradFn, Integer> countDependencies(GradFn top) {
        Map<GradFn, Integer> dependencies = new IdentityHashMap<>();
        Map<GradFn, Boolean> seen = new IdentityHashMap<>();
        ArrayDeque<GradFn> stack = new ArrayDeque<>();
        stack.push(top);
        seen.put(top, Boolean.TRUE);
        while (!stack.isEmpty()) {
            GradFn fn = stack.pop();
            for (GradFn target : fn.next) {
                if (target == null) continue;
                dependencies.merge(target, 1, Integer::sum);
                if (seen.put(target, Boolean.TRUE) == null) stack.push(target);
            }
        }
        return dependencies;
    }
}
