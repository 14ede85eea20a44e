package dev.vmmkit.bench;

import dev.vmmkit.bench.TensorTrace.T;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

/**
 * GPT-2 ({@code GPT2LMHeadModel}) in bf16 with PyTorch's default attention, as the recording
 * {@code traces/gen_gpt2_b32.csv.gz} shows it: token and position embeddings summed; per layer and
 * step LayerNorm (its output, then its float32 mean and rstd), one fused q/k/v projection
 * ({@code c_attn}, three times the hidden size), the DynamicCache grown by {@code torch.cat} (every
 * head cached), the attention mask's slice, attention output, the heads merged into a contiguous
 * tensor, {@code c_proj} (the residual added in place), LayerNorm, the MLP's {@code c_fc} (four
 * times the hidden size), {@code gelu_new}'s seven temporaries of that size
 * ({@code 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))}), its {@code c_proj} and the
 * residual sum. The language-model head shares the token embedding, so it is no weight of its own.
 */
final class Gpt2Decoder extends Decoder {
    /** GPT-2's {@code n_positions}: the position embedding's rows. */
    private static final long POSITIONS = 2048;
    /** {@code gelu_new}'s temporaries of the MLP's width, each freed two steps after it is made. */
    private static final int GELU_TEMPORARIES = 8;


    /** {@code workspaces}: the libraries' workspaces, made at the first matrix product into this list. */
    Gpt2Decoder(TensorTrace tensors, GenerateTrace.Shape shape, List<T> workspaces) {
        super(tensors, shape, workspaces);
    }

    @Override
    List<T> loadWeights() throws IOException {
        long h = shape.hidden();
        long inner = shape.intermediate();
        List<T> weights = new ArrayList<>();
        weights.add(alloc(shape.vocab() * h * BF16)); // wte, also the lm_head
        weights.add(alloc(POSITIONS * h * BF16)); // wpe
        for (int l = 0; l < shape.layers(); l++) {
            weights.add(alloc(h * BF16)); // ln_1 weight
            weights.add(alloc(h * BF16)); // ln_1 bias
            weights.add(alloc(h * 3 * h * BF16)); // attn.c_attn weight
            weights.add(alloc(3 * h * BF16)); // attn.c_attn bias
            weights.add(alloc(h * h * BF16)); // attn.c_proj weight
            weights.add(alloc(h * BF16)); // attn.c_proj bias
            weights.add(alloc(h * BF16)); // ln_2 weight
            weights.add(alloc(h * BF16)); // ln_2 bias
            weights.add(alloc(h * inner * BF16)); // mlp.c_fc weight
            weights.add(alloc(inner * BF16)); // mlp.c_fc bias
            weights.add(alloc(inner * h * BF16)); // mlp.c_proj weight
            weights.add(alloc(h * BF16)); // mlp.c_proj bias
        }
        weights.add(alloc(h * BF16)); // ln_f weight
        weights.add(alloc(h * BF16)); // ln_f bias
        return weights;
    }

    @Override
    T forward(int batch, int tokens, int seq, T[] keys, T[] values) throws IOException {
        long bt = (long) batch * tokens;
        long row = bt * shape.hidden() * BF16;
        T cachePosition = alloc(tokens * INT64);
        T positionIds = alloc(bt * INT64);
        T tokenEmbeddings = alloc(row); // wte
        T positionEmbeddings = alloc(row); // wpe
        T hiddenStates = alloc(row); // their sum
        free(tokenEmbeddings, positionEmbeddings);
        T[] mask = causalMask(batch, bt, seq);
        makeWorkspacesOnce();

        for (int l = 0; l < shape.layers(); l++) {
            T layerInput = hiddenStates;
            T normed = layerNorm(bt);
            T attention = attention(batch, tokens, seq, l, keys, values);
            T normed2 = layerNorm(bt);
            T activated = geluNew(alloc(bt * shape.intermediate() * BF16)); // c_fc
            T down = alloc(row); // mlp.c_proj
            free(activated);
            hiddenStates = alloc(row); // residual + mlp
            free(down, normed2, attention, normed, layerInput);
        }
        T normed = layerNorm(bt); // ln_f
        free(hiddenStates, mask[1], mask[0], positionIds, cachePosition);
        T logits = alloc((long) batch * shape.vocab() * BF16); // the tied lm_head on the last token
        free(normed);
        return logits;
    }

    /** LayerNorm in bf16: its output, then the float32 mean and rstd it also returns, dropped. */
    private T layerNorm(long bt) throws IOException {
        T out = alloc(bt * shape.hidden() * BF16);
        T mean = alloc(bt * FP32);
        T rstd = alloc(bt * FP32);
        free(mean, rstd);
        return out;
    }

    /** Self-attention of layer {@code l}, its cache grown by {@code torch.cat}; returns c_proj's output, the residual added. */
    private T attention(int batch, int tokens, int seq, int l, T[] keys, T[] values) throws IOException {
        long bt = (long) batch * tokens;
        long row = bt * shape.hidden() * BF16;
        T qkv = alloc(3 * row); // c_attn, split into views
        long cacheBytes = (long) batch * shape.hidden() * seq * BF16;
        growCache(l, keys, values, cacheBytes);
        tensors.scratch(2, BF16);
        T mask = alloc(bt * seq * BF16); // the mask's slice for this layer, made contiguous
        T a = alloc(INT64);
        T b = alloc(INT64);
        T output = alloc(row); // scaled_dot_product_attention
        free(a, b);
        if (tokens > 1) tensors.scratch(1, 256);
        free(mask);
        T merged = alloc(row); // the heads merged, contiguous
        free(output, qkv);
        T projected = alloc(row); // c_proj
        free(merged);
        return projected;
    }

    /** gelu_new over {@code x}: its temporaries, each freed once the next two exist; frees {@code x}, returns the result. */
    private T geluNew(T x) throws IOException {
        long bytes = x.bytes();
        T[] made = new T[GELU_TEMPORARIES];
        for (int i = 0; i < GELU_TEMPORARIES; i++) {
            made[i] = alloc(bytes);
            if (i >= 2) free(made[i - 2]);
        }
        free(made[GELU_TEMPORARIES - 2], x);
        return made[GELU_TEMPORARIES - 1];
    }
}
