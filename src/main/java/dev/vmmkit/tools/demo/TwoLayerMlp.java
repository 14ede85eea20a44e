package dev.vmmkit.tools.demo;

import dev.vmmkit.lifetime.Ops;
import dev.vmmkit.lifetime.Scope;
import dev.vmmkit.lifetime.Tensor;
import dev.vmmkit.lifetime.TensorDevice;
import dev.vmmkit.lifetime.TensorRecord;

/**
 * {@code logits = relu(x @ w1 + b1) @ w2 + b2}, trained with softmax cross-entropy. The parameters
 * live in a {@link TensorRecord}, which owns them; initialised as PyTorch's {@code nn.Linear} does
 * (uniform in +-1/sqrt(fan_in)), from a seed, so every driver starts from the same numbers.
 */
final class TwoLayerMlp implements AutoCloseable {
    private final TensorRecord params;

    TwoLayerMlp(TensorDevice device, int inputs, int hidden, int classes, long seed) {
        float bound1 = (float) (1 / Math.sqrt(inputs));
        float bound2 = (float) (1 / Math.sqrt(hidden));
        try (Tensor w1 = device.uniform(seed, -bound1, bound1, inputs, hidden).requiresGrad(true);
             Tensor b1 = device.uniform(seed + 1, -bound1, bound1, hidden).requiresGrad(true);
             Tensor w2 = device.uniform(seed + 2, -bound2, bound2, hidden, classes).requiresGrad(true);
             Tensor b2 = device.uniform(seed + 3, -bound2, bound2, classes).requiresGrad(true)) {
            params = TensorRecord.of("w1", w1, "b1", b1, "w2", w2, "b2", b2); // the record keeps them
        }
    }

    Tensor[] parameters() {
        return new Tensor[] {params.tensor("w1"), params.tensor("b1"), params.tensor("w2"), params.tensor("b2")};
    }

    /**
     * The mean loss over the batch, in the caller's scope. Each temporary is closed as soon as the
     * next op has used it, and the rest go when this method's scope closes, so after the call only
     * what backward() reads is alive, as with Python's reference counting.
     */
    Tensor loss(Tensor x, Tensor labels) {
        try (Scope forward = Scope.open()) {
            Tensor hidden;
            try (Tensor xw = Ops.matmul(x, params.tensor("w1"))) {
                hidden = Ops.add(xw, params.tensor("b1"));
            }
            Tensor activation = Ops.relu(hidden);
            Tensor logits;
            try (Tensor hw = Ops.matmul(activation, params.tensor("w2"))) {
                logits = Ops.add(hw, params.tensor("b2"));
            }
            return Scope.promote(Ops.softmaxCrossEntropy(logits, labels));
        }
    }

    @Override
    public void close() {
        params.release();
    }
}
