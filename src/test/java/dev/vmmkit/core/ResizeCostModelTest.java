package dev.vmmkit.core;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The cost model against the figures it was built from (GPU-FACTS.md). */
class ResizeCostModelTest {
    private static final long MIB = 1L << 20;
    private static final long GIB = 1L << 30;

    @Test
    void aTwoGibibyteCopyCostsAboutOnePointOneMilliseconds() {
        assertEquals(1132.3 + 5.0, ResizeCostModel.CUDA.copyMicros(2 * GIB), 1.0);
    }

    @Test
    void twoGibibytesInTwoMebibyteHandlesAreCheaperToCopy() {
        // 1024 handles: about 17 us of setAccess and 12 us of unmap each, against 1.1 ms of copying.
        assertFalse(ResizeCostModel.CUDA.remapIsCheaper(1024, 2 * MIB, 1024, 2 * MIB, 2 * GIB));
        assertTrue(ResizeCostModel.CUDA.remapMicros(1024, 2 * MIB, 1024, 2 * MIB) > 25_000);
    }

    @Test
    void twoGibibytesInOneHandleAreCheaperToRemap() {
        double remap = ResizeCostModel.CUDA.remapMicros(1, 2 * GIB, 1, 2 * GIB);
        assertEquals(35.9 + 0.7 + 80.8, remap, 1e-9);
        assertTrue(ResizeCostModel.CUDA.remapIsCheaper(1, 2 * GIB, 1, 2 * GIB, 2 * GIB));
    }

    @Test
    void latenciesBetweenMeasuredSizesAreInterpolatedOnALogScale() {
        double[] curve = {10, 20, 30, 40};
        assertEquals(10, ResizeCostModel.at(curve, 1), 1e-9);
        assertEquals(10, ResizeCostModel.at(curve, 2 * MIB), 1e-9);
        assertEquals(15, ResizeCostModel.at(curve, (long) (2 * MIB * Math.sqrt(32))), 1e-6);
        assertEquals(40, ResizeCostModel.at(curve, 64 * GIB), 1e-9);
    }

    @Test
    void theHostEmulationRemapsAnyWholePage() {
        assertTrue(ResizeCostModel.forDriver("host").remapIsCheaper(1, 2 * MIB, 1, 2 * MIB, 2 * MIB));
        assertTrue(ResizeCostModel.forDriver("host").remapIsCheaper(32, 2 * MIB, 32, 2 * MIB, 64 * MIB));
    }

    @Test
    void measuredLatenciesReplaceTheDefaults() {
        ResizeCostModel slow = ResizeCostModel.CUDA.withPerHandleMicros(2 * GIB, 1000, 1000, 1000);
        assertEquals(3000, slow.remapMicros(1, 2 * GIB, 1, 2 * GIB), 1e-6);
        assertFalse(slow.remapIsCheaper(1, 2 * GIB, 1, 2 * GIB, 2 * GIB));
    }

    @Test
    void badFiguresAreRefusedWithTheirName() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> new ResizeCostModel(new double[]{1, 2}, new double[4], new double[4], 1, 1));
        assertTrue(e.getMessage().contains("mapMicros"), e.getMessage());
        assertThrows(IllegalArgumentException.class,
                () -> new ResizeCostModel(new double[4], new double[4], new double[4], 0, 1));
    }
}
