package dev.vmmkit.lifetime;

/**
 * Plain stochastic gradient descent over a set of parameters. It keeps them beyond the constructor
 * call, so it acquires them (a {@link TensorList}); {@link #close()} gives them back.
 */
public final class Sgd implements AutoCloseable {
    private final TensorList params;
    private final float learningRate;

    public Sgd(float learningRate, Tensor... params) {
        if (!(learningRate > 0)) throw new IllegalArgumentException("learning rate must be positive: " + learningRate);
        this.learningRate = learningRate;
        this.params = new TensorList(params);
        Scope current = Scope.current();
        if (current != null) current.unregister(this.params); // owned by this optimizer, not the scope
    }

    /** Updates each parameter in place from its gradient, then frees the gradients. */
    public void step() {
        for (Tensor p : params.tensors()) {
            Ops.sgdStep(p, learningRate);
            p.zeroGrad();
        }
    }

    @Override
    public void close() {
        params.release();
    }
}
