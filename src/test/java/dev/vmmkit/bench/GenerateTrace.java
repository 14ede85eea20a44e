package dev.vmmkit.bench;

import dev.vmmkit.bench.TensorTrace.T;
import dev.vmmkit.trace.TraceWriter;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * A synthetic trace of HuggingFace transformers' {@code generate()} on a decoder in bf16 (Llama-style,
 * {@link LlamaDecoder}, or GPT-2, {@link Gpt2Decoder}), tensor by tensor in the order the recorded
 * {@code generate()} traces show (PyTorch's cache off, {@code traces/README.md}): weights loaded one
 * by one; then, per {@code generate()} call, a prefill over the left-padded prompt and one decoding
 * step per new token. Per step, besides the decoder's forward pass: the last token's logits, the
 * float32 scores kept across steps, the logits processors, the chosen tokens, {@code input_ids} and
 * the attention mask grown by one token, the stopping criteria. Sizes are the tensors' bytes, as
 * vmmkit's trace records them. Seeded, so it repeats.
 */
final class GenerateTrace {
    private static final long FP32 = Decoder.FP32;
    private static final long INT64 = Decoder.INT64;
    private static final long BOOL = Decoder.BOOL;
    /** cuBLAS's workspace, made at the first matrix product and kept (the H100 recording of {@code gen_llama_b8}). */
    static final long[] BLAS_WORKSPACE = {32L << 20};
    /**
     * The library workspaces the H200 recordings ({@code gen_llama_b24} ... {@code gen_llama_b64},
     * {@code gen_qwen2_b32}) show at the first matrix product, kept for the run: one of 64 MiB, then
     * cuBLAS's 32 MiB.
     */
    static final long[] H200_WORKSPACES = {64L << 20, 32L << 20};

    /**
     * A model and its {@code generate()} calls: batch sizes, prompt length and new tokens per call
     * ({@code sampled}: do_sample with temperature, top-k and top-p, else greedy), and the bytes of
     * the library workspaces made at the first matrix product and kept.
     */
    record Shape(String name, int hidden, int layers, int heads, int kvHeads, int intermediate, int vocab,
                 int[] batches, int prompt, int newTokens, boolean sampled, long[] workspaces, boolean gpt2) {
        /** A Llama-style model with cuBLAS's workspace alone. */
        Shape(String name, int hidden, int layers, int heads, int kvHeads, int intermediate, int vocab,
              int[] batches, int prompt, int newTokens, boolean sampled) {
            this(name, hidden, layers, heads, kvHeads, intermediate, vocab, batches, prompt, newTokens, sampled,
                    BLAS_WORKSPACE, false);
        }

        @Override
        public String toString() {
            return String.format("%s: hidden %d, %d layers, %d heads (%d cached), intermediate %d, vocabulary %d;"
                            + " batches %s, prompt %d, %d new tokens, %s; workspaces %s", name, hidden, layers, heads, kvHeads,
                    intermediate, vocab, java.util.Arrays.toString(batches), prompt, newTokens, sampled ? "sampled" : "greedy",
                    java.util.Arrays.toString(workspaces)) + (gpt2 ? "; GPT-2" : "");
        }

        /** The same model and calls with other batches, prompt and length. */
        Shape with(String newName, int[] newBatches, int newPrompt, int newTokensEach) {
            return new Shape(newName, hidden, layers, heads, kvHeads, intermediate, vocab, newBatches, newPrompt,
                    newTokensEach, sampled, workspaces, gpt2);
        }

        /** The same calls, sampled. */
        Shape sampling() {
            return new Shape(name, hidden, layers, heads, kvHeads, intermediate, vocab, batches, prompt, newTokens, true,
                    workspaces, gpt2);
        }

        /** The same, with the libraries' workspaces of another machine. */
        Shape withWorkspaces(long[] bytes) {
            return new Shape(name, hidden, layers, heads, kvHeads, intermediate, vocab, batches, prompt, newTokens, sampled,
                    bytes, gpt2);
        }

        /** The same, GPT-2's architecture ({@link Gpt2Decoder}): every head cached, tied embeddings. */
        Shape asGpt2() {
            return new Shape(name, hidden, layers, heads, kvHeads, intermediate, vocab, batches, prompt, newTokens, sampled,
                    workspaces, true);
        }
    }

    /**
     * The recorded program {@code gen_llama_b8} ({@code scripts/gpu/workloads.py}, shipped as
     * {@code traces/gen_llama_b8.csv.gz}): 8 layers, hidden 1024, grouped-query attention, calls of
     * batch 8 then 4, 128-token prompts, 96 new tokens, greedy.
     */
    static final Shape LLAMA_B8 = new Shape("generation", 1024, 8, 16, 4, 2816, 32000, new int[]{8, 4}, 128, 96, false);
    private static final Shape QWEN2 = new Shape("generation_qwen2", 896, 12, 14, 2, 4864, 32000, new int[]{16, 8}, 256, 300, false);
    private static final Shape GPT2 = new Shape("generation_gpt2", 768, 12, 12, 12, 3072, 50257, new int[]{4, 2}, 96, 400, false)
            .asGpt2();

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
            QWEN2.with("generation_qwen2_b48_sampled", new int[]{48}, 96, 200).sampling().withWorkspaces(H200_WORKSPACES), // gen_qwen2_b48_sampled
            GPT2.with("generation_gpt2_b32", new int[]{32, 16}, 64, 200).withWorkspaces(H200_WORKSPACES)); // gen_gpt2_b32

    private final Shape shape;
    private final TensorTrace tensors;
    private final SplittableRandom rng = new SplittableRandom(29);
    /** The libraries' workspaces, made at the first matrix product and kept for the run. */
    private final List<T> workspaces = new ArrayList<>();
    private final Decoder decoder;

    private GenerateTrace(TraceWriter out, Shape shape) {
        this.tensors = new TensorTrace(out);
        this.shape = shape;
        this.decoder = shape.gpt2
                ? new Gpt2Decoder(tensors, shape, workspaces)
                : new LlamaDecoder(tensors, shape, workspaces);
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

    private void run() throws IOException {
        List<T> weights = decoder.loadWeights();
        for (int batch : shape.batches) generate(batch);
        for (T w : weights) free(w);
        for (T w : workspaces) free(w);
    }

    /** One generate() call. */
    private void generate(int batch) throws IOException {
        int prompt = shape.prompt;
        T inputIds = alloc((long) batch * prompt * INT64);
        T attentionMask = alloc((long) batch * prompt * INT64);
        tensors.scratch(6, BOOL);
        T unfinished = alloc(batch * INT64);
        T[] keys = new T[shape.layers];
        T[] values = new T[shape.layers];
        T scores = null; // the previous step's processed scores live until the next step replaces them
        T logitsF = null;
        int seq = 0;
        for (int step = 0; step < shape.newTokens; step++) {
            int tokens = step == 0 ? prompt : 1;
            seq += tokens;
            T lastLogits = decoder.forward(batch, tokens, seq, keys, values);
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

    /** The logits processors (two that mask tokens; with sampling temperature, top-k, top-p): returns the processed scores. */
    private T processLogits(int batch, T logits) throws IOException {
        long n = (long) batch * shape.vocab;
        T masked = logits;
        for (int processor = 0; processor < 2; processor++) {
            T isEos = alloc(n * BOOL);
            T vocabMask = alloc(shape.vocab * BOOL);
            tensors.scratch(2, shape.vocab * BOOL);
            T copy = alloc(n * FP32);
            tensors.scratch(1, FP32);
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
        tensors.scratch(3, batch * INT64);
        T next = alloc(batch * INT64);
        free(drawn);
        if (rng.nextInt(8) == 0) tensors.scratch(1, batch * INT64); // an occasional streamer copy
        return next;
    }

    /** Max length and end-of-sequence checks, and unfinished &= ~done. */
    private void stoppingCriteria(int batch) throws IOException {
        T maxLength = alloc(batch * BOOL);
        T eos = alloc(batch * BOOL);
        tensors.scratch(4, batch * BOOL);
        T done = alloc(batch * BOOL);
        free(maxLength, eos, done);
        tensors.scratch(2, BOOL);
    }
}
