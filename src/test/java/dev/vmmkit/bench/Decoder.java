package dev.vmmkit.bench;

import dev.vmmkit.bench.TensorTrace.T;

import java.io.IOException;
import java.util.List;

/**
 * One decoder architecture's tensors for {@link GenerateTrace}: its weights as they are loaded, and
 * one forward pass as transformers runs it, tensor by tensor. The pieces every architecture shares
 * (the causal mask, the libraries' workspaces) are here.
 */
abstract class Decoder {
    /** Bytes per element of the dtypes the models use. */
    static final long BF16 = 2;
    static final long FP32 = 4;
    static final long INT64 = 8;
    static final long BOOL = 1;

    final TensorTrace tensors;
    final GenerateTrace.Shape shape;
    /** The libraries' workspaces, made at the first matrix product and kept for the run. */
    private final List<T> workspaces;

    Decoder(TensorTrace tensors, GenerateTrace.Shape shape, List<T> workspaces) {
        this.tensors = tensors;
        this.shape = shape;
        this.workspaces = workspaces;
    }

    /** The weights, allocated one by one in the order the model is moved to the device. */
    abstract List<T> loadWeights() throws IOException;

    /**
     * One forward pass of {@code tokens} tokens per sequence, {@code seq} in the cache after it, the
     * cache's tensors of each layer grown in {@code keys} and {@code values}; returns the last token's
     * bf16 logits.
     */
    abstract T forward(int batch, int tokens, int seq, T[] keys, T[] values) throws IOException;

    final T alloc(long bytes) throws IOException {
        return tensors.alloc(bytes);
    }

    final void free(T... freed) throws IOException {
        tensors.free(freed);
    }

    /**
     * The causal mask from the 2-D attention mask, with its boolean and int64 intermediates; returns
     * the padding mask and the causal mask, which live until the forward pass ends.
     */
    final T[] causalMask(int batch, long bt, int seq) throws IOException {
        T padding = alloc((long) batch * seq * BOOL);
        tensors.scratch(2, (long) batch * seq * INT64);
        tensors.scratch(3, INT64);
        T causal = alloc(bt * seq * BOOL);
        tensors.scratch(2, (long) batch * seq * BOOL);
        return new T[]{padding, causal};
    }

    /**
     * The DynamicCache of layer {@code l} grown by {@code torch.cat}: a key and then a value of
     * {@code cacheBytes}, each old one freed right after its successor exists.
     */
    final void growCache(int l, T[] keys, T[] values, long cacheBytes) throws IOException {
        T grownKeys = alloc(cacheBytes);
        free(keys[l]);
        keys[l] = grownKeys;
        T grownValues = alloc(cacheBytes);
        free(values[l]);
        values[l] = grownValues;
    }

    /** At the first matrix product of the run: the libraries' workspaces. */
    final void makeWorkspacesOnce() throws IOException {
        if (workspaces.isEmpty()) for (long bytes : shape.workspaces()) workspaces.add(alloc(bytes));
    }
}
