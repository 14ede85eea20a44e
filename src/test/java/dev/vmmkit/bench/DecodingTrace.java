package dev.vmmkit.bench;

import dev.vmmkit.bench.TensorTrace.T;
import dev.vmmkit.trace.TraceWriter;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * A synthetic trace of Llama-style text generation as PyTorch's caching allocator sees it under a
 * HuggingFace {@code generate()} loop with eager attention, fp16: weights loaded tensor by tensor,
 * then several {@code generate()} calls with different batch sizes and prompt lengths. Per layer and
 * step, a DynamicCache grows by {@code torch.cat} (a key and a value tensor one token longer, the old
 * ones freed), grouped-query keys and values are expanded to every head, attention scores grow with
 * the sequence, and the RMSNorm, rotary, projection, MLP and residual temporaries come and go; per
 * step, the causal mask, the vocabulary-sized logits and the sampling temporaries (temperature,
 * top-k, top-p, softmax, multinomial) and the grown {@code input_ids} and attention mask.
 * Sizes are the tensors' bytes, as PyTorch's memory history records them. Seeded, so it repeats.
 */
final class DecodingTrace {
    private static final long FP16 = 2;
    private static final long FP32 = 4;
    private static final long INT64 = 8;
    private static final long BOOL = 1;

    /**
     * The model and the {@code generate()} calls: (batch, prompt tokens, new tokens) each.
     * {@code kvHeads < heads} is grouped-query attention.
     */
    record Shape(int hidden, int layers, int heads, int kvHeads, int intermediate, int vocab, int[][] calls) {
    }

    /** A scaled-down Llama (TinyLlama's shape at half width, about 380 MiB of weights); short and long prompts, batches 1 to 8. */
    static final Shape BATCHED = new Shape(1024, 12, 16, 4, 2816, 32000,
            new int[][]{{1, 96, 160}, {4, 384, 96}, {2, 40, 128}, {8, 24, 64}, {1, 700, 48}, {3, 160, 80}});
    /** A smaller model with full multi-head attention (every head cached), long prompts, batch 1 and 2: the cache dominates. */
    static final Shape LONG_CONTEXT = new Shape(768, 16, 12, 12, 2048, 50257,
            new int[][]{{1, 1500, 160}, {2, 600, 120}, {1, 2000, 100}});

    private final int hidden;
    private final int layers;
    private final int heads;
    private final int kvHeads;
    private final int headDim;
    private final int intermediate;
    private final int vocab;
    private final int[][] calls;
    private final int topK = 50;

    private final TensorTrace tensors;
    private final SplittableRandom rng = new SplittableRandom(23);

    private DecodingTrace(TraceWriter out, Shape shape) {
        this.tensors = new TensorTrace(out);
        this.hidden = shape.hidden;
        this.layers = shape.layers;
        this.heads = shape.heads;
        this.kvHeads = shape.kvHeads;
        this.headDim = shape.hidden / shape.heads;
        this.intermediate = shape.intermediate;
        this.vocab = shape.vocab;
        this.calls = shape.calls;
    }

    /** Writes the trace of {@code shape} to {@code file}. */
    static void write(Path file, Shape shape) throws IOException {
        try (TraceWriter w = TraceWriter.open(file, "synthetic Llama-style decoding trace (HuggingFace generate, eager attention, fp16)")) {
            new DecodingTrace(w, shape).run();
        }
    }


    private T alloc(long bytes) throws IOException {
        return tensors.alloc(bytes);
    }

    private void free(T... freed) throws IOException {
        tensors.free(freed);
    }

    private void run() throws IOException {
        List<T> weights = loadWeights();
        for (int[] call : calls) generate(call[0], call[1], call[2]);
        for (T w : weights) free(w);
    }

    private List<T> loadWeights() throws IOException {
        List<T> weights = new ArrayList<>();
        weights.add(alloc((long) vocab * hidden * FP16)); // embed_tokens
        for (int l = 0; l < layers; l++) {
            weights.add(alloc((long) hidden * hidden * FP16)); // q_proj
            weights.add(alloc((long) kvHeads * headDim * hidden * FP16)); // k_proj
            weights.add(alloc((long) kvHeads * headDim * hidden * FP16)); // v_proj
            weights.add(alloc((long) hidden * hidden * FP16)); // o_proj
            weights.add(alloc((long) intermediate * hidden * FP16)); // gate_proj
            weights.add(alloc((long) intermediate * hidden * FP16)); // up_proj
            weights.add(alloc((long) hidden * intermediate * FP16)); // down_proj
            weights.add(alloc(hidden * FP16)); // input_layernorm
            weights.add(alloc(hidden * FP16)); // post_attention_layernorm
        }
        weights.add(alloc(hidden * FP16)); // norm
        weights.add(alloc((long) vocab * hidden * FP16)); // lm_head
        weights.add(alloc(headDim / 2 * FP32)); // rotary inv_freq
        return weights;
    }

    private void generate(int batch, int prompt, int newTokens) throws IOException {
        T inputIds = alloc((long) batch * prompt * INT64);
        T attentionMask = alloc((long) batch * prompt * INT64);
        T unfinished = alloc(batch * INT64);
        T[] keys = new T[layers];
        T[] values = new T[layers];
        int seq = 0;
        for (int step = 0; step < newTokens; step++) {
            int tokens = step == 0 ? prompt : 1;
            seq += tokens;
            T logits = forward(batch, tokens, seq, keys, values);
            T next = sample(batch, logits);
            // input_ids = cat([input_ids, next]); the same for the attention mask.
            T grownIds = alloc((long) batch * (seq + 1) * INT64);
            free(inputIds, next);
            inputIds = grownIds;
            T grownMask = alloc((long) batch * (seq + 1) * INT64);
            free(attentionMask);
            attentionMask = grownMask;
            stoppingCriteria(batch);
        }
        for (int l = 0; l < layers; l++) free(keys[l], values[l]);
        free(unfinished, attentionMask);
        // The caller decodes the ids and drops them; a few calls keep them a while.
        free(inputIds);
    }

    /** One forward pass over {@code tokens} new tokens with {@code seq} in the cache after it; returns the last token's fp32 logits. */
    private T forward(int batch, int tokens, int seq, T[] keys, T[] values) throws IOException {
        long bt = (long) batch * tokens;
        T cachePosition = alloc(tokens * INT64);
        T positionIds = alloc(tokens * INT64);
        T mask = alloc((long) batch * tokens * seq * FP16); // the 4-D causal mask, eager attention
        // Rotary embedding, once per forward: inv_freq expanded, freqs, cat, cos, sin.
        T invExpanded = alloc((long) batch * headDim / 2 * FP32);
        T freqs = alloc(bt * headDim / 2 * FP32);
        T emb = alloc(bt * headDim * FP32);
        T cos = alloc(bt * headDim * FP16);
        T sin = alloc(bt * headDim * FP16);
        free(invExpanded, freqs, emb);

        T hiddenStates = alloc(bt * hidden * FP16); // embed_tokens
        for (int l = 0; l < layers; l++) {
            T residual = hiddenStates;
            T normed = rmsNorm(bt);
            T attention = attention(batch, tokens, seq, normed, cos, sin, l, keys, values);
            T sum = alloc(bt * hidden * FP16);
            free(residual, attention);
            residual = sum;
            normed = rmsNorm(bt);
            T gate = alloc(bt * intermediate * FP16);
            T act = alloc(bt * intermediate * FP16);
            free(gate);
            T up = alloc(bt * intermediate * FP16);
            T product = alloc(bt * intermediate * FP16);
            free(act, up);
            T down = alloc(bt * hidden * FP16);
            free(product, normed);
            hiddenStates = alloc(bt * hidden * FP16);
            free(residual, down);
        }
        T normed = rmsNorm(bt);
        free(hiddenStates);
        T last = alloc((long) batch * hidden * FP16); // hidden_states[:, -1:, :] (logits_to_keep=1)
        free(normed);
        T logits = alloc((long) batch * vocab * FP16); // lm_head
        free(last, cos, sin, mask, positionIds, cachePosition);
        T cloned = alloc((long) batch * vocab * FP16); // outputs.logits[:, -1, :].clone()
        free(logits);
        T scores = alloc((long) batch * vocab * FP32); // .float()
        free(cloned);
        return scores;
    }

    /** RMSNorm of the hidden states: float32, pow, mean, rsqrt, multiply, back to fp16, times the weight. */
    private T rmsNorm(long bt) throws IOException {
        T asFloat = alloc(bt * hidden * FP32);
        T squared = alloc(bt * hidden * FP32);
        T variance = alloc(bt * FP32);
        free(squared);
        T rsqrt = alloc(bt * FP32);
        free(variance);
        T scaled = alloc(bt * hidden * FP32);
        free(asFloat, rsqrt);
        T half = alloc(bt * hidden * FP16);
        free(scaled);
        T weighted = alloc(bt * hidden * FP16);
        free(half);
        return weighted;
    }

    /** Self-attention of one layer with its cache grown by {@code torch.cat}; frees {@code normed}'s use, returns o_proj's output. */
    private T attention(int batch, int tokens, int seq, T normed, T cos, T sin, int l, T[] keys, T[] values) throws IOException {
        long bt = (long) batch * tokens;
        T q = alloc(bt * hidden * FP16);
        T k = alloc(bt * kvHeads * headDim * FP16);
        T v = alloc(bt * kvHeads * headDim * FP16);
        free(normed);
        T qEmbedded = tensors.rotate(q.bytes());
        free(q);
        T kEmbedded = tensors.rotate(k.bytes());
        free(k);
        long cacheBytes = (long) batch * kvHeads * seq * headDim * FP16;
        T grownKeys = alloc(cacheBytes);
        free(keys[l]);
        keys[l] = grownKeys;
        free(kEmbedded);
        T grownValues = alloc(cacheBytes);
        free(values[l]);
        values[l] = grownValues;
        free(v);
        // repeat_kv: keys and values expanded to every query head (a view when every head is cached).
        long repeatedBytes = (long) batch * heads * seq * headDim * FP16;
        boolean grouped = kvHeads < heads;
        T repeatedKeys = grouped ? alloc(repeatedBytes) : null;
        T repeatedValues = grouped ? alloc(repeatedBytes) : null;
        long scoreCount = (long) batch * heads * tokens * seq;
        T scores = alloc(scoreCount * FP16); // q @ k^T (scaled in place)
        free(qEmbedded, repeatedKeys);
        T masked = alloc(scoreCount * FP16); // + causal mask
        free(scores);
        T softmax = alloc(scoreCount * FP32); // softmax(dtype=float32)
        free(masked);
        T weights = alloc(scoreCount * FP16); // .to(query.dtype)
        free(softmax);
        T context = alloc(bt * hidden * FP16); // weights @ v
        free(weights, repeatedValues);
        T contiguous = alloc(bt * hidden * FP16); // transpose(1, 2).contiguous()
        free(context);
        T output = alloc(bt * hidden * FP16); // o_proj
        free(contiguous);
        return output;
    }


    /** The logits processors and multinomial sampling of {@code generate(do_sample=True)}; frees the scores. */
    private T sample(int batch, T scores) throws IOException {
        long n = (long) batch * vocab;
        T tempered = alloc(n * FP32); // / temperature
        free(scores);
        T topValues = alloc((long) batch * topK * FP32);
        T topIndices = alloc((long) batch * topK * INT64);
        T below = alloc(n * BOOL);
        free(topValues, topIndices);
        T topKFiltered = alloc(n * FP32);
        free(below, tempered);
        T sorted = alloc(n * FP32);
        T sortedIndices = alloc(n * INT64);
        T sortedProbs = alloc(n * FP32);
        T cumulative = alloc(n * FP32);
        free(sortedProbs);
        T removeSorted = alloc(n * BOOL);
        free(cumulative, sorted);
        T remove = alloc(n * BOOL); // scatter back to vocabulary order
        free(removeSorted, sortedIndices);
        T topPFiltered = alloc(n * FP32);
        free(remove, topKFiltered);
        T probs = alloc(n * FP32);
        free(topPFiltered);
        T drawn = alloc(batch * INT64); // multinomial
        T workspace = alloc(n * FP32); // multinomial's temporaries
        free(workspace, probs);
        T next = alloc(batch * INT64); // next * unfinished + pad * (1 - unfinished)
        free(drawn);
        if (rng.nextInt(4) == 0) { // an occasional streamer or logits copy for the caller
            T copy = alloc(batch * INT64);
            free(copy);
        }
        return next;
    }

    /** Max length and end-of-sequence checks, and unfinished &= ~done. */
    private void stoppingCriteria(int batch) throws IOException {
        T maxLength = alloc(batch * BOOL);
        T eos = alloc(batch * BOOL);
        T done = alloc(batch * BOOL);
        free(maxLength, eos);
        T notDone = alloc(batch * BOOL);
        free(done, notDone);
    }
}
