package dev.vmmkit.lifetime;

import java.util.ArrayDeque;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One node of the autograd graph: how to turn the gradient of an op's output into gradients of its
 * inputs. It holds a counted reference to each tensor its backward pass reads (the seed's
 * {@code TensorRef}), and an edge to the node of each input that needs a gradient.
 *
 * <p>Nodes are reference counted too: the output tensor holds one reference, each downstream edge
 * another. When the last goes, the node releases its saved tensors and its edges, in cascade; so
 * dropping a graph that never ran backward frees it all. backward() releases each node's saved
 * tensors as soon as the node has run.
 */
abstract class GradFn {
    private static final AtomicLong SEQUENCE = new AtomicLong();

    /** Creation order: backward runs later nodes first, as PyTorch does. */
    final long sequence = SEQUENCE.incrementAndGet();
    /** Per input: the node its gradient goes to, or null when it needs none. */
    final GradFn[] next;
    private final Tensor[] saved;
    private final AtomicInteger references = new AtomicInteger(1);

    /** Takes over one reference to each edge in {@code next}; retains each saved tensor. */
    GradFn(GradFn[] next, Tensor... saved) {
        this.next = next;
        this.saved = saved;
        for (Tensor t : saved) t.retain();
    }

    /** The op's name, for messages. */
    abstract String name();

    /**
     * The gradient of each input (a new reference the caller owns), null where {@code next[i]} is
     * null. {@code gradOutput} is borrowed. If computing one fails, those already made are released.
     */
    final Tensor[] apply(Tensor gradOutput) {
        Tensor[] grads = new Tensor[next.length];
        try {
            computeGrads(gradOutput, grads);
        } catch (RuntimeException e) {
            for (Tensor g : grads) if (g != null) g.release();
            throw e;
        }
        return grads;
    }

    /** Fills {@code grads[i]} for each input whose {@code next[i]} is not null. */
    abstract void computeGrads(Tensor gradOutput, Tensor[] grads);

    /** A tensor this node saved. */
    final Tensor saved(int i) {
        Tensor t = saved[i];
        if (t == null) {
            throw new IllegalStateException(name() + ": the graph was already freed (backward() ran through it)");
        }
        return t;
    }

    /** Gives back one saved tensor early, once this node's remaining work no longer reads it. */
    final void releaseSaved(int i) {
        Tensor t = saved[i];
        saved[i] = null;
        if (t != null) t.release();
    }

    final void releaseAllSaved() {
        for (int i = 0; i < saved.length; i++) releaseSaved(i);
    }

    final GradFn retainNode() {
        references.incrementAndGet();
        return this;
    }

    /** Drops a reference; at zero releases the saved tensors and the edges, iteratively (deep graphs). */
    final void releaseNode() {
        ArrayDeque<GradFn> dropped = new ArrayDeque<>();
        dropped.push(this);
        while (!dropped.isEmpty()) {
            GradFn fn = dropped.pop();
            if (fn.references.decrementAndGet() != 0) continue;
            fn.releaseAllSaved();
            for (int i = 0; i < fn.next.length; i++) {
                GradFn edge = fn.next[i];
                fn.next[i] = null;
                if (edge != null) dropped.push(edge);
            }
        }
    }

    /** The edge for an op input: its node (retained), a new accumulator for a leaf that wants a gradient, or null. */
    static GradFn edgeOf(Tensor input) {
        GradFn fn = input.gradFn();
        if (fn != null) return fn.retainNode();
        return input.requiresGrad() ? new AccumulateGrad(input) : null;
    }
}
