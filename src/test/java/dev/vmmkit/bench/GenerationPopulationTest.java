package dev.vmmkit.bench;

import org.junit.jupiter.api.Test;

import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The random programs are drawn within the documented ranges, the same for a seed every time, and
 * varied: a check population means something only if it repeats and covers its ranges.
 */
class GenerationPopulationTest {
    private static final int DRAWS = 400;

    @Test
    void everyProgramIsWithinTheRangesAndUnderAMillionOperations() {
        SplittableRandom rng = new SplittableRandom(1);
        for (int i = 0; i < DRAWS; i++) {
            GenerateTrace.Shape s = GenerationPopulation.draw(rng, "p" + i);
            String what = s.toString();
            assertTrue(s.hidden() >= 512 && s.hidden() <= 1536 && s.hidden() % 64 == 0, what);
            assertEquals(s.hidden() / 64, s.heads(), what);
            assertTrue(s.kvHeads() >= 1 && s.kvHeads() <= s.heads() && s.heads() % s.kvHeads() == 0, what);
            assertTrue(s.layers() >= 4 && s.layers() <= 16, what);
            assertTrue(s.batches().length >= 1 && s.batches().length <= 3, what);
            for (int c = 0; c < s.batches().length; c++) {
                assertTrue(s.batches()[c] >= 1 && s.batches()[c] <= 64, what);
                if (c > 0) assertTrue(s.batches()[c] <= s.batches()[c - 1], "later calls are no larger: " + what);
            }
            assertTrue(s.prompt() >= 32 && s.prompt() <= 512, what);
            assertTrue(s.newTokens() >= 32 && s.newTokens() <= 480, what);
            assertTrue((long) s.batches().length * s.layers() * 40 * s.newTokens() <= 1_000_000, "operations: " + what);
            assertTrue(!s.gpt2() || s.kvHeads() == s.heads(), "GPT-2 caches every head: " + what);
        }
    }

    @Test
    void aSeedDrawsTheSameProgramsEveryTime() {
        SplittableRandom a = new SplittableRandom(2);
        SplittableRandom b = new SplittableRandom(2);
        for (int i = 0; i < 50; i++) {
            assertEquals(GenerationPopulation.draw(a, "p").toString(), GenerationPopulation.draw(b, "p").toString());
        }
    }

    @Test
    void thePopulationCoversEachKindOfProgram() {
        SplittableRandom rng = new SplittableRandom(1);
        int grouped = 0, everyHead = 0, gpt2 = 0, sampled = 0, severalCalls = 0, longPrompts = 0, largeBatches = 0;
        for (int i = 0; i < DRAWS; i++) {
            GenerateTrace.Shape s = GenerationPopulation.draw(rng, "p" + i);
            if (s.kvHeads() < s.heads()) grouped++;
            else everyHead++;
            if (s.gpt2()) gpt2++;
            if (s.sampled()) sampled++;
            if (s.batches().length > 1) severalCalls++;
            if (s.prompt() >= 384) longPrompts++;
            if (s.batches()[0] >= 48) largeBatches++;
        }
        for (int count : new int[]{grouped, everyHead, gpt2, sampled, severalCalls, longPrompts, largeBatches}) {
            assertTrue(count >= DRAWS / 20, "each kind is at least 5 % of the population: " + count);
        }
    }
}
