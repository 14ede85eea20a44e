package dev.vmmkit.bench;

import dev.vmmkit.trace.TraceWriter;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.SplittableRandom;

/**
 * Writes five synthetic traces in vmmkit's format, so allocator settings are not tuned on the BERT
 * trace alone: {@code training.csv.gz} (persistent weights and optimizer state; each iteration
 * allocates activations in the forward pass and frees them in reverse in the backward pass, beside
 * gradients and temporaries), {@code generation.csv.gz} and the other generation classes
 * (transformers' {@code generate()} tensor by tensor, as recorded: {@link GenerateTrace}), {@code inference.csv.gz}
 * (an encoder serving batches of varying size and sequence length: each batch's attention
 * tensors have a size of their own, as a BERT server's do), and {@code decoding.csv.gz} and
 * {@code decoding_long.csv.gz} (Llama-style HuggingFace generation, tensor by tensor, batched and
 * long-context: {@link DecodingTrace}). Seeded, so they repeat.
 * Usage: {@code scripts/run-test-class.sh dev.vmmkit.bench.SyntheticTraces DIR}.
 */
public final class SyntheticTraces {
    private static final long KIB = 1L << 10;
    private static final long MIB = 1L << 20;

    private long nextAddress = 1L << 32;
    private TraceWriter out;

    public static void main(String[] args) throws IOException {
        Path dir = Path.of(args.length > 0 ? args[0] : ".");
        new SyntheticTraces().training(dir.resolve("training.csv.gz"));
        for (GenerateTrace.Shape shape : GenerateTrace.FAMILY) GenerateTrace.write(dir.resolve(shape.name() + ".csv.gz"), shape);
        DecodingTrace.write(dir.resolve("decoding.csv.gz"), DecodingTrace.BATCHED);
        DecodingTrace.write(dir.resolve("decoding_long.csv.gz"), DecodingTrace.LONG_CONTEXT);
        new SyntheticTraces().inference(dir.resolve("inference.csv.gz"));
    }

    private long alloc(long size) throws IOException {
        long address = nextAddress;
        nextAddress += (size + 511) & -512L;
        out.alloc(address, size, 0);
        return address;
    }

    private void free(long address, long size) throws IOException {
        out.free(address, size, 0);
    }

    void training(Path file) throws IOException {
        SplittableRandom rng = new SplittableRandom(7);
        try (TraceWriter w = TraceWriter.open(file, "synthetic training-like trace")) {
            out = w;
            List<long[]> weights = new ArrayList<>();
            for (int i = 0; i < 120; i++) {
                long size = (1 + rng.nextInt(48)) * MIB + rng.nextInt(1024) * 512L;
                weights.add(new long[]{alloc(size), size});
                weights.add(new long[]{alloc(size), size}); // optimizer state
            }
            for (int iteration = 0; iteration < 8; iteration++) {
                Deque<long[]> activations = new ArrayDeque<>();
                for (int layer = 0; layer < 300; layer++) {
                    long size = (rng.nextInt(4) == 0 ? 8 + rng.nextInt(56) : 1 + rng.nextInt(8)) * MIB + rng.nextInt(2048) * 512L;
                    activations.push(new long[]{alloc(size), size});
                    long tmp = 64 * KIB + rng.nextInt(4096) * 512L;
                    long t = alloc(tmp);
                    free(t, tmp);
                }
                List<long[]> grads = new ArrayList<>();
                for (int i = 0; i < weights.size() / 2; i++) {
                    long[] a = activations.pop();
                    long size = weights.get(2 * i)[1];
                    grads.add(new long[]{alloc(size), size});
                    free(a[0], a[1]);
                }
                while (!activations.isEmpty()) {
                    long[] a = activations.pop();
                    free(a[0], a[1]);
                }
                for (long[] g : grads) free(g[0], g[1]);
            }
            for (long[] wt : weights) free(wt[0], wt[1]);
        }
    }

    /**
     * A BERT-base-like encoder (12 layers, hidden 768, 12 heads, float32) serving 60 batches of 1 to
     * 32 sequences of 64 to 512 tokens (at most 8,192 tokens a batch). Per layer: the QKV projection,
     * attention scores and probabilities (batch x heads x sequence squared), the context, the
     * output projection, the feed-forward pair (4 x hidden), layer norms, and a few small temporaries.
     */
    void inference(Path file) throws IOException {
        SplittableRandom rng = new SplittableRandom(13);
        int layers = 12;
        int hidden = 768;
        int heads = 12;
        try (TraceWriter w = TraceWriter.open(file, "synthetic encoder-inference trace")) {
            out = w;
            List<long[]> weights = new ArrayList<>();
            weights.add(new long[]{alloc(30522L * hidden * 4), 30522L * hidden * 4}); // embeddings
            for (int l = 0; l < layers; l++) {
                for (long size : new long[]{3L * hidden * hidden * 4, (long) hidden * hidden * 4,
                        4L * hidden * hidden * 4, 4L * hidden * hidden * 4}) {
                    weights.add(new long[]{alloc(size), size});
                }
            }
            for (int batch = 0; batch < 60; batch++) {
                int sequence = 64 * (1 + rng.nextInt(8));
                int sequences = 1 + rng.nextInt(Math.min(32, 8192 / sequence));
                long tokens = (long) sequences * sequence;
                long row = tokens * hidden * 4;
                long h = alloc(row);
                for (int l = 0; l < layers; l++) {
                    long qkv = alloc(3 * row);
                    long scoreBytes = (long) sequences * heads * sequence * sequence * 4;
                    long scores = alloc(scoreBytes);
                    long probs = alloc(scoreBytes);
                    free(scores, scoreBytes);
                    long context = alloc(row);
                    free(probs, scoreBytes);
                    free(qkv, 3 * row);
                    long projected = alloc(row);
                    free(context, row);
                    long normed = alloc(row);
                    free(projected, row);
                    free(h, row);
                    long inner = alloc(4 * row);
                    long activated = alloc(4 * row);
                    free(inner, 4 * row);
                    long ffn = alloc(row);
                    free(activated, 4 * row);
                    h = alloc(row);
                    free(ffn, row);
                    free(normed, row);
                    for (int t = 0; t < 4; t++) {
                        long size = 512 + rng.nextInt(128) * 512L;
                        long a = alloc(size);
                        free(a, size);
                    }
                }
                free(h, row);
            }
            for (long[] wt : weights) free(wt[0], wt[1]);
        }
    }
}
