package dev.vmmkit.bench;

import dev.vmmkit.bench.TensorTrace.T;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

/**
 * A Llama-style decoder (Llama, Qwen2) in bf16 with PyTorch's default attention (scaled dot product,
 * no score tensors). Per layer and step: RMSNorm in float32 (to float, pow, mean, add, rsqrt,
 * multiply, back to bf16, times the weight), q/k/v, rotary embedding (x*cos, rotate_half's slice,
 * neg and cat, *sin, sum), the DynamicCache grown by {@code torch.cat} (a key and a value one token
 * longer, the old ones freed right after), the grouped-query keys and values expanded to every
 * head, the attention mask's slice, attention output, o_proj, the residual sum, the MLP (gate,
 * SiLU, up, product, down) and the residual sum; the layer's input lives until the layer returns.
 */
final class LlamaDecoder extends Decoder {
    private final int headDim;

    /** {@code workspaces}: the libraries' workspaces, made at the first matrix product into this list. */
    LlamaDecoder(TensorTrace tensors, GenerateTrace.Shape shape, List<T> workspaces) {
        super(tensors, shape, workspaces);
        this.headDim = shape.hidden() / shape.heads();
    }

    @Override
    List<T> loadWeights() throws IOException {
        long h = shape.hidden();
        long kv = (long) shape.kvHeads() * headDim;
        long inter = shape.intermediate();
        List<T> weights = new ArrayList<>();
        for (int l = 0; l < shape.layers(); l++) {
            weights.add(alloc(h * h * BF16)); // q_proj
            weights.add(alloc(kv * h * BF16)); // k_proj
            weights.add(alloc(kv * h * BF16)); // v_proj
            weights.add(alloc(h * h * BF16)); // o_proj
            weights.add(alloc(inter * h * BF16)); // gate_proj
            weights.add(alloc(inter * h * BF16)); // up_proj
            weights.add(alloc(h * inter * BF16)); // down_proj
            weights.add(alloc(h * BF16)); // input_layernorm
            weights.add(alloc(h * BF16)); // post_attention_layernorm
        }
        weights.add(alloc(h * BF16)); // norm
        weights.add(alloc(headDim / 2 * FP32)); // rotary inv_freq
        weights.add(alloc(shape.vocab() * h * BF16)); // embed_tokens
        weights.add(alloc(shape.vocab() * h * BF16)); // lm_head
        return weights;
    }

    @Override
    T forward(int batch, int tokens, int seq, T[] keys, T[] values) throws IOException {
        long bt = (long) batch * tokens;
        T cachePosition = alloc(tokens * INT64);
        T positionIds = alloc(bt * INT64);
        T embedded = alloc(bt * shape.hidden() * BF16); // embed_tokens
        T[] mask = causalMask(batch, bt, seq);
        // Rotary embedding, once per forward: inv_freq expanded, positions, freqs, cat, cos, sin.
        T invExpanded = alloc((long) batch * headDim / 2 * FP32);
        T positions = alloc(bt * FP32);
        T invCopy = alloc((long) batch * headDim / 2 * FP32);
        T freqs = alloc(bt * headDim / 2 * FP32 * 2);
        T emb = alloc(bt * headDim * FP32);
        T cosF = alloc(bt * headDim * FP32);
        T sinF = alloc(bt * headDim * FP32);
        T cos = alloc(bt * headDim * BF16);
        T sin = alloc(bt * headDim * BF16);
        free(invExpanded, positions, invCopy, freqs, emb, cosF, sinF);
        makeWorkspacesOnce();

        T hiddenStates = embedded;
        for (int l = 0; l < shape.layers(); l++) {
            T layerInput = hiddenStates;
            T normed = rmsNorm(bt);
            T attention = attention(batch, tokens, seq, normed, cos, sin, l, keys, values);
            T afterAttention = alloc(bt * shape.hidden() * BF16); // residual + attention
            free(attention);
            T normed2 = rmsNorm(bt);
            long mlp = bt * shape.intermediate() * BF16;
            T gate = alloc(mlp);
            T act = alloc(mlp);
            free(gate);
            T up = alloc(mlp);
            T product = alloc(mlp);
            free(act, up);
            T down = alloc(bt * shape.hidden() * BF16);
            free(product, normed2);
            hiddenStates = alloc(bt * shape.hidden() * BF16); // residual + mlp
            free(down, afterAttention, layerInput);
        }
        T normed = rmsNorm(bt);
        free(hiddenStates, cos, sin, mask[1], mask[0], positionIds, cachePosition);
        T logits = alloc((long) batch * shape.vocab() * BF16); // lm_head on the last token (logits_to_keep=1)
        free(normed);
        return logits;
    }

    /** LlamaRMSNorm: to float32, pow, mean, +eps, rsqrt, multiply, to bf16, times the weight. */
    private T rmsNorm(long bt) throws IOException {
        long row = bt * shape.hidden();
        T asFloat = alloc(row * FP32);
        T squared = alloc(row * FP32);
        T mean = alloc(bt * FP32);
        free(squared);
        T plusEps = alloc(bt * FP32);
        T rsqrt = alloc(bt * FP32);
        free(plusEps);
        T scaled = alloc(row * FP32);
        free(rsqrt, asFloat);
        T half = alloc(row * BF16);
        T weighted = alloc(row * BF16);
        free(half, scaled, mean);
        return weighted;
    }

    /** Self-attention of layer {@code l}, its cache grown by {@code torch.cat}; frees {@code normed}, returns o_proj's output. */
    private T attention(int batch, int tokens, int seq, T normed, T cos, T sin, int l, T[] keys, T[] values) throws IOException {
        long bt = (long) batch * tokens;
        long kvRow = (long) shape.kvHeads() * headDim;
        T q = alloc(bt * shape.hidden() * BF16);
        T k = alloc(bt * kvRow * BF16);
        T v = alloc(bt * kvRow * BF16);
        T qEmbedded = tensors.rotate(q.bytes());
        T kEmbedded = tensors.rotate(k.bytes());
        free(q, k);
        long cacheBytes = (long) batch * kvRow * seq * BF16;
        growCache(l, keys, values, cacheBytes);
        free(kEmbedded, v);
        // repeat_kv: keys and values expanded to every query head (a view when every head is cached).
        boolean grouped = shape.kvHeads() < shape.heads();
        long repeatedBytes = (long) batch * shape.heads() * seq * headDim * BF16;
        T repeatedKeys = grouped ? alloc(repeatedBytes) : null;
        T repeatedValues = grouped ? alloc(repeatedBytes) : null;
        tensors.scratch(2, BF16);
        T mask = alloc(bt * seq * BF16); // the mask's slice for this layer, made contiguous
        T a = alloc(INT64);
        T b = alloc(INT64);
        T output = alloc(bt * shape.hidden() * BF16); // scaled_dot_product_attention
        free(a, b);
        if (tokens > 1) tensors.scratch(1, 256);
        free(mask, repeatedKeys, repeatedValues);
        T projected = alloc(bt * shape.hidden() * BF16); // o_proj
        free(output, qEmbedded, normed);
        return projected;
    }
}
