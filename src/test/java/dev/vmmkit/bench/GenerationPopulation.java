package dev.vmmkit.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.SplittableRandom;

/**
 * Writes a population of {@code generate()} traces drawn at random ({@link GenerateTrace}: models,
 * batches, prompts, lengths, sampling and workspaces), none of which any rule was tuned on. The
 * trace classes are what rules are measured on; this population is what they are checked against
 * afterwards, as held-out traces would be: a rule that only fits the classes shows here.
 * Usage: {@code scripts/run-test-class.sh dev.vmmkit.bench.GenerationPopulation DIR COUNT [SEED]}
 * ({@code scripts/trace-population.sh} writes it and replays it under each setting).
 */
public final class GenerationPopulation {
    public static void main(String[] args) throws IOException {
        Path dir = Path.of(args[0]);
        int count = Integer.parseInt(args[1]);
        long seed = args.length > 2 ? Long.parseLong(args[2]) : 1;
        Files.createDirectories(dir);
        SplittableRandom rng = new SplittableRandom(seed);
        for (int i = 0; i < count; i++) {
            GenerateTrace.Shape shape = draw(rng, String.format("population_%03d", i));
            GenerateTrace.write(dir.resolve(shape.name() + ".csv.gz"), shape);
            System.out.println(shape);
        }
    }

    /** One program: a small decoder, one to three generate() calls, sized to stay under a million operations. */
    static GenerateTrace.Shape draw(SplittableRandom rng, String name) {
        int headSize = 64;
        int hidden = headSize * (8 + 4 * rng.nextInt(5));            // 512 ... 1,536
        int heads = hidden / headSize;
        int kvHeads = switch (rng.nextInt(3)) {
            case 0 -> heads;                                        // every head cached
            case 1 -> Math.max(1, heads / 4);                       // grouped-query attention
            default -> 2;
        };
        int layers = 4 + rng.nextInt(13);                           // 4 ... 16
        int intermediate = (hidden * (8 + rng.nextInt(3)) / 3) & -64;
        int vocab = new int[]{32000, 50257, 65536}[rng.nextInt(3)];
        int calls = 1 + rng.nextInt(3);
        int[] batches = new int[calls];
        batches[0] = 1 + rng.nextInt(64);
        for (int c = 1; c < calls; c++) batches[c] = Math.max(1, batches[c - 1] - rng.nextInt(batches[c - 1] / 2 + 1));
        int prompt = 32 * (1 + rng.nextInt(16));                    // 32 ... 512 tokens
        // Steps cost about layers x 40 operations each: keep a program under about 700,000 operations.
        int newTokens = Math.max(32, Math.min(480, 700_000 / (calls * layers * 40)));
        newTokens = 32 + rng.nextInt(newTokens - 31);
        boolean sampled = rng.nextInt(3) == 0;
        long[] workspaces = rng.nextBoolean() ? GenerateTrace.BLAS_WORKSPACE : GenerateTrace.H200_WORKSPACES;
        boolean gpt2 = kvHeads == heads && rng.nextInt(3) == 0;
        return new GenerateTrace.Shape(name, hidden, layers, heads, kvHeads, intermediate, vocab, batches, prompt,
                newTokens, sampled, workspaces, gpt2);
    }
}
