package dev.vmmkit.tools;

import java.util.Arrays;

/** The one percentile rule of vmmkit's reports: nearest rank over sorted samples. */
public final class Percentiles {

    private Percentiles() {
    }

    /** Sorts the first {@code count} samples in place, so {@link #nearestRank} can read them. */
    public static void sort(long[] samples, int count) {
        Arrays.sort(samples, 0, count);
    }

    /**
     * The smallest of the first {@code count} (sorted) samples that at least {@code fraction} of them
     * do not exceed; 0 when there are none.
     */
    public static long nearestRank(long[] sorted, int count, double fraction) {
        if (count == 0) return 0;
        int rank = (int) Math.ceil(fraction * count);
        return sorted[Math.clamp(rank - 1, 0, count - 1)];
    }
}
