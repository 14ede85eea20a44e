package dev.vmmkit.lifetime;

/**
 * The node at a leaf: adds the incoming gradient to the leaf's {@link Tensor#grad()}. It holds a
 * counted reference to the leaf, as PyTorch's AccumulateGrad holds its variable.
 */
final class AccumulateGrad extends GradFn {

    AccumulateGrad(Tensor leaf) {
        super(new GradFn[0], leaf);
    }

    @Override
    String name() {
        return "AccumulateGrad";
    }

    @Override
    void computeGrads(Tensor gradOutput, Tensor[] none) {
        Tensor leaf = saved(0);
        Tensor current = leaf.grad();
        if (current == null) {
            // Keep the incoming gradient itself when no one else holds it (no copy), else a copy.
            leaf.setGrad(gradOutput.refCnt() == 1 ? (Tensor) gradOutput.retain() : Kernels.copy(gradOutput));
        } else {
            leaf.setGrad(Kernels.add(current, gradOutput));
            current.release();
        }
    }
}
