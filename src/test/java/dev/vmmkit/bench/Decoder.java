package dev.vmmkit.bench;

import dev.vmmkit.bench.TensorTrace.T;

import java.io.IOException;
import java.util.List;

/**
 * One decoder architecture's tensors for {@link GenerateTrace}: its weights as they are loaded, and
 * one forward pass as transformers runs it, tensor by tensor.
 */
interface Decoder {
    /** Bytes per element of the dtypes the models use. */
    long BF16 = 2;
    long FP32 = 4;
    long INT64 = 8;
    long BOOL = 1;

    /** The weights, allocated one by one in the order the model is moved to the device. */
    List<T> loadWeights() throws IOException;

    /**
     * One forward pass of {@code tokens} tokens per sequence, {@code seq} in the cache after it, the
     * cache's tensors of each layer grown in {@code keys} and {@code values}; returns the last token's
     * bf16 logits.
     */
    T forward(int batch, int tokens, int seq, T[] keys, T[] values) throws IOException;
}
