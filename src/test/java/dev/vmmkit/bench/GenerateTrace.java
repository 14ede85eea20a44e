package dev.vmmkit.bench;

import dev.vmmkit.bench.TensorTrace.T;
import dev.vmmkit.trace.TraceWriter;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * A synthetic trace of HuggingFace transformers' {@code generate()} on a Llama-style decoder in
 * bf16 with PyTorch's default attention (scaled dot product, no score tensors), tensor by tensor in
 * the order the recorded {@code generate()} traces show (PyTorch's cache off, {@code traces/README.md}):
 * weights loaded one by one; then, per {@code generate()} call, a prefill over the left-padded prompt
 * and one decoding step per new token. Per layer and step: RMSNorm in float32 (to float, pow, mean,
 * add, rsqrt, multiply, back to bf16, times the weight), q/k/v, rotary embedding (x*cos,
 * rotate_half's slice, neg and cat, *sin, sum), the DynamicCache grown by {@code torch.cat} (a key
 * and a value one token longer, the old ones freed right after), the grouped-query keys and values
 * expanded to every head, the attention mask's slice, attention output, o_proj, the residual sum,
 * the MLP (gate, SiLU, up, product, down) and the residual sum; the layer's input lives until the
 * layer returns. Per step: the embedding, mask and rotary tensors, the last token's logits, the
 * float32 scores kept across steps, the logits processors, the chosen tokens, {@code input_ids} and
 * the attention mask grown by one token, the stopping criteria. Sizes are the tensors' bytes, as
 * vmmkit's trace records them. Seeded, so it repeats.
 */
final class GenerateTrace {
    private static final long BF16 = 2;
    private static final long FP32 = 4;
    private static final long INT64 = 8;
    private static final long BOOL = 1;
    /** cuBLAS's workspace, made at the first matrix product and kept (the H100 recording of {@code gen_llama_b8}). */
    private static final long[] BLAS_WORKSPACE = {32L << 20};
    /**
     * The library workspaces the H200 recordings ({@code gen_llama_b24} ... {@code gen_llama_b64},
     * {@code gen_qwen2_b32}) show at the first matrix product, kept for the run: one of 64 MiB, then
     * cuBLAS's 32 MiB.
     */
    private static final long[] H200_WORKSPACES = {64L << 20, 32L << 20};

    /**
     * A model and its {@code generate()} calls: batch sizes, prompt length and new tokens per call
     * ({@code sampled}: do_sample with temperature, top-k and top-p, else greedy), and the bytes of
     * the library workspaces made at the first matrix product and kept.
     */
    record Shape(String name, int hidden, int layers, int heads, int kvHeads, int intermediate, int vocab,
                 int[] batches, int prompt, int newTokens, boolean sampled, long[] workspaces) {
        Shape(String name, int hidden, int layers, int heads, int kvHeads, int intermediate, int vocab,
              int[] batches, int prompt, int newTokens, boolean sampled) {
            this(name, hidden, layers, heads, kvHeads, intermediate, vocab, batches, prompt, newTokens, sampled, BLAS_WORKSPACE);
        }

        @Override
        public String toString() {
            return String.format("%s: hidden %d, %d layers, %d heads (%d cached), intermediate %d, vocabulary %d;"
                            + " batches %s, prompt %d, %d new tokens, %s; workspaces %s", name, hidden, layers, heads, kvHeads,
                    intermediate, vocab, java.util.Arrays.toString(batches), prompt, newTokens, sampled ? "sampled" : "greedy",
                    java.util.Arrays.toString(workspaces));
        }

        /** The same model and calls with other batches, prompt and length. */
        Shape with(String newName, int[] newBatches, int newPrompt, int newTokensEach) {
            return new Shape(newName, hidden, layers, heads, kvHeads, intermediate, vocab, newBatches, newPrompt,
                    newTokensEach, sampled, workspaces);
        }

        /** The same calls, sampled. */
        Shape sampling() {
            return new Shape(name, hidden, layers, heads, kvHeads, intermediate, vocab, batches, prompt, newTokens, true, workspaces);
        }

        /** The same, with the libraries' workspaces of another machine. */
        Shape withWorkspaces(long[] bytes) {
            return new Shape(name, hidden, layers, heads, kvHeads, intermediate, vocab, batches, prompt, newTokens, sampled, bytes);
        }
    }

    /**
     * The recorded program {@code gen_llama_b8} ({@code scripts/gpu/workloads.py}, shipped as
     * {@code traces/gen_llama_b8.csv.gz}): 8 layers, hidden 1024, grouped-query attention, calls of
     * batch 8 then 4, 128-token prompts, 96 new tokens, greedy.
     */
    static final Shape LLAMA_B8 = new Shape("generation", 1024, 8, 16, 4, 2816, 32000, new int[]{8, 4}, 128, 96, false);
    private static final Shape QWEN2 = new Shape("generation_qwen2", 896, 12, 14, 2, 4864, 32000, new int[]{16, 8}, 256, 300, false);
    private static final Shape GPT2 = new Shape("generation_gpt2", 768, 12, 12, 12, 3072, 50257, new int[]{4, 2}, 96, 400, false);

    /**
     * The generation classes: the recorded program, and the same kind of program with other
     * models, batches, prompts and lengths, up to about a million operations and 1 GiB of live
     * peak. Which of them caches keys and values in the large size class (batch x kv heads x
     * sequence x head size past the small limit) decides much of how they fragment.
     */
    static final List<Shape> FAMILY = List.of(
            LLAMA_B8,
            LLAMA_B8.with("generation_long", new int[]{8, 8}, 128, 320),
            LLAMA_B8.with("generation_b16", new int[]{16}, 256, 400),
            // The program recorded on an H200 as traces/gen_llama_b32.csv.gz, with that machine's workspaces.
            LLAMA_B8.with("generation_b32", new int[]{32, 24}, 64, 200).withWorkspaces(H200_WORKSPACES),
            LLAMA_B8.with("generation_b1", new int[]{1, 1}, 64, 600),
            LLAMA_B8.with("generation_prompt1024", new int[]{4}, 1024, 400),
            new Shape("generation_sampled", 1024, 8, 16, 4, 2816, 32000, new int[]{8, 8}, 128, 320, true),
            new Shape("generation_deep", 1024, 16, 16, 4, 2816, 32000, new int[]{8, 4}, 128, 256, false),
            QWEN2,
            GPT2,
            // Neighbours of generation_b32 (the cache in the large size class, the peak at the end of
            // decoding): the class, not one batch size, is what a held-out generate() trace is like.
            LLAMA_B8.with("generation_b24", new int[]{24, 16}, 96, 300).withWorkspaces(H200_WORKSPACES), // gen_llama_b24
            LLAMA_B8.with("generation_b28", new int[]{28, 20}, 64, 240),
            LLAMA_B8.with("generation_b40", new int[]{40, 32}, 64, 200),
            LLAMA_B8.with("generation_b48", new int[]{48, 32}, 64, 200).withWorkspaces(H200_WORKSPACES), // gen_llama_b48
            LLAMA_B8.with("generation_b64", new int[]{64}, 64, 160).withWorkspaces(H200_WORKSPACES), // gen_llama_b64
            QWEN2.with("generation_qwen2_b32", new int[]{32, 24}, 64, 200).withWorkspaces(H200_WORKSPACES), // gen_qwen2_b32
            LLAMA_B8.with("generation_b40_3calls", new int[]{40, 32, 24}, 64, 240).withWorkspaces(H200_WORKSPACES), // gen_llama_b40
            QWEN2.with("generation_qwen2_b48_sampled", new int[]{48}, 96, 200).sampling().withWorkspaces(H200_WORKSPACES)); // gen_qwen2_b48_sampled

    private final Shape shape;
    private final int headDim;
    private final TensorTrace tensors;
    private final SplittableRandom rng = new SplittableRandom(29);
    private final List<T> workspaces = new ArrayList<>();

    private GenerateTrace(TraceWriter out, Shape shape) {
        this.tensors = new TensorTrace(out);
        this.shape = shape;
        this.headDim = shape.hidden / shape.heads;
    }

    /** Writes the trace of {@code shape} to {@code file}. */
    static void write(Path file, Shape shape) throws IOException {
        try (TraceWriter w = TraceWriter.open(file, "synthetic transformers generate() trace, " + shape)) {
            new GenerateTrace(w, shape).run();
        }
    }


    private T alloc(long bytes) throws IOException {
        return tensors.alloc(bytes);
    }

    private void free(T... freed) throws IOException {
        tensors.free(freed);
    }

    /** Allocates and frees {@code count} small temporaries of {@code bytes} each (index and mask bookkeeping). */
    private void scratch(int count, long bytes) throws IOException {
        for (int i = 0; i < count; i++) free(alloc(bytes));
    }

    private void run() throws IOException {
        List<T> weights = loadWeights();
        for (int batch : shape.batches) generate(batch);
        for (T w : weights) free(w);
        for (T w : workspaces) free(w);
    }

    private List<T> loadWeights() throws IOException {
        long h = shape.hidden;
        long kv = (long) shape.kvHeads * headDim;
        long inter = shape.intermediate;
        List<T> weights = new ArrayList<>();
        for (int l = 0; l < shape.layers; l++) {
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
        weights.add(alloc(shape.vocab * h * BF16)); // embed_tokens
        weights.add(alloc(shape.vocab * h * BF16)); // lm_head
        return weights;
    }

    /** One generate() call. */
    private void generate(int batch) throws IOException {
        int prompt = shape.prompt;
        T inputIds = alloc((long) batch * prompt * INT64);
        T attentionMask = alloc((long) batch * prompt * INT64);
        scratch(6, BOOL);
        T unfinished = alloc(batch * INT64);
        T[] keys = new T[shape.layers];
        T[] values = new T[shape.layers];
        T scores = null; // the previous step's processed scores live until the next step replaces them
        T logitsF = null;
        int seq = 0;
        for (int step = 0; step < shape.newTokens; step++) {
            int tokens = step == 0 ? prompt : 1;
            seq += tokens;
            T lastLogits = forward(batch, tokens, seq, keys, values);
            free(logitsF);
            logitsF = alloc((long) batch * shape.vocab * FP32); // logits[:, -1, :].to(float32)
            free(lastLogits);
            T processed = processLogits(batch, logitsF);
            free(scores);
            scores = processed;
            T next = choose(batch, scores);
            T grownIds = alloc((long) batch * (seq + 1) * INT64); // cat([input_ids, next])
            free(inputIds);
            inputIds = grownIds;
            T grownMask = alloc((long) batch * (seq + 1) * INT64); // cat([attention_mask, ones])
            free(attentionMask);
            attentionMask = grownMask;
            stoppingCriteria(batch);
            free(next);
        }
        for (int l = 0; l < shape.layers; l++) free(keys[l], values[l]);
        free(scores, logitsF, unfinished, attentionMask, inputIds);
    }

    /** One forward pass of {@code tokens} tokens, {@code seq} in the cache after it; returns the last token's bf16 logits. */
    private T forward(int batch, int tokens, int seq, T[] keys, T[] values) throws IOException {
        long bt = (long) batch * tokens;
        T cachePosition = alloc(tokens * INT64);
        T positionIds = alloc(bt * INT64);
        T embedded = alloc(bt * shape.hidden * BF16); // embed_tokens
        // The causal mask from the 2-D attention mask: boolean and int64 intermediates.
        T padding = alloc((long) batch * seq * BOOL);
        scratch(2, (long) batch * seq * INT64);
        scratch(3, INT64);
        T causal = alloc(bt * seq * BOOL);
        scratch(2, (long) batch * seq * BOOL);
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
        if (workspaces.isEmpty()) for (long bytes : shape.workspaces) workspaces.add(alloc(bytes));

        T hiddenStates = embedded;
        for (int l = 0; l < shape.layers; l++) {
            T layerInput = hiddenStates;
            T normed = rmsNorm(bt);
            T attention = attention(batch, tokens, seq, normed, cos, sin, l, keys, values);
            T afterAttention = alloc(bt * shape.hidden * BF16); // residual + attention
            free(attention);
            T normed2 = rmsNorm(bt);
            long mlp = bt * shape.intermediate * BF16;
            T gate = alloc(mlp);
            T act = alloc(mlp);
            free(gate);
            T up = alloc(mlp);
            T product = alloc(mlp);
            free(act, up);
            T down = alloc(bt * shape.hidden * BF16);
            free(product, normed2);
            hiddenStates = alloc(bt * shape.hidden * BF16); // residual + mlp
            free(down, afterAttention, layerInput);
        }
        T normed = rmsNorm(bt);
        free(hiddenStates, cos, sin, causal, padding, positionIds, cachePosition);
        T logits = alloc((long) batch * shape.vocab * BF16); // lm_head on the last token (logits_to_keep=1)
        free(normed);
        return logits;
    }

    /** LlamaRMSNorm: to float32, pow, mean, +eps, rsqrt, multiply, to bf16, times the weight. */
    private T rmsNorm(long bt) throws IOException {
        long row = bt * shape.hidden;
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
        long kvRow = (long) shape.kvHeads * headDim;
        T q = alloc(bt * shape.hidden * BF16);
        T k = alloc(bt * kvRow * BF16);
        T v = alloc(bt * kvRow * BF16);
        T qEmbedded = tensors.rotate(q.bytes());
        T kEmbedded = tensors.rotate(k.bytes());
        free(q, k);
        long cacheBytes = (long) batch * kvRow * seq * BF16;
        T grownKeys = alloc(cacheBytes);
        free(keys[l]);
        keys[l] = grownKeys;
        T grownValues = alloc(cacheBytes);
        free(values[l]);
        values[l] = grownValues;
        free(kEmbedded, v);
        // repeat_kv: keys and values expanded to every query head (a view when every head is cached).
        boolean grouped = shape.kvHeads < shape.heads;
        long repeatedBytes = (long) batch * shape.heads * seq * headDim * BF16;
        T repeatedKeys = grouped ? alloc(repeatedBytes) : null;
        T repeatedValues = grouped ? alloc(repeatedBytes) : null;
        scratch(2, BF16);
        T mask = alloc(bt * seq * BF16); // the mask's slice for this layer, made contiguous
        T a = alloc(INT64);
        T b = alloc(INT64);
        T output = alloc(bt * shape.hidden * BF16); // scaled_dot_product_attention
        free(a, b);
        if (tokens > 1) scratch(1, 256);
        free(mask, repeatedKeys, repeatedValues);
        T projected = alloc(bt * shape.hidden * BF16); // o_proj
        free(output, qEmbedded, normed);
        return projected;
    }


    /** The logits processors (two that mask tokens; with sampling temperature, top-k, top-p): returns the processed scores. */
    private T processLogits(int batch, T logits) throws IOException {
        long n = (long) batch * shape.vocab;
        T masked = logits;
        for (int processor = 0; processor < 2; processor++) {
            T isEos = alloc(n * BOOL);
            T vocabMask = alloc(shape.vocab * BOOL);
            scratch(2, shape.vocab * BOOL);
            T copy = alloc(n * FP32);
            scratch(1, FP32);
            T result = alloc(n * FP32); // torch.where(mask, -inf, scores)
            free(copy, isEos, vocabMask);
            if (masked != logits) free(masked);
            masked = result;
        }
        if (!shape.sampled) return masked;
        T tempered = alloc(n * FP32);
        free(masked);
        T topValues = alloc(batch * 50L * FP32);
        T below = alloc(n * BOOL);
        free(topValues);
        T topK = alloc(n * FP32);
        free(below, tempered);
        T sorted = alloc(n * FP32);
        T sortedIndices = alloc(n * INT64);
        T cumulative = alloc(n * FP32);
        T removeSorted = alloc(n * BOOL);
        free(cumulative, sorted);
        T remove = alloc(n * BOOL);
        free(removeSorted, sortedIndices);
        T topP = alloc(n * FP32);
        free(remove, topK);
        return topP;
    }

    /** Greedy argmax, or softmax and multinomial; then next * unfinished + pad * (1 - unfinished). */
    private T choose(int batch, T scores) throws IOException {
        T drawn;
        if (shape.sampled) {
            T probs = alloc((long) batch * shape.vocab * FP32);
            drawn = alloc(batch * INT64);
            T workspace = alloc((long) batch * shape.vocab * FP32);
            free(workspace, probs);
        } else {
            drawn = alloc(batch * INT64);
        }
        scratch(3, batch * INT64);
        T next = alloc(batch * INT64);
        free(drawn);
        if (rng.nextInt(8) == 0) scratch(1, batch * INT64); // an occasional streamer copy
        return next;
    }

    /** Max length and end-of-sequence checks, and unfinished &= ~done. */
    private void stoppingCriteria(int batch) throws IOException {
        T maxLength = alloc(batch * BOOL);
        T eos = alloc(batch * BOOL);
        scratch(4, batch * BOOL);
        T done = alloc(batch * BOOL);
        free(maxLength, eos, done);
        scratch(2, BOOL);
    }
}
