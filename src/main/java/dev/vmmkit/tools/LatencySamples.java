package dev.vmmkit.tools;

import java.util.Arrays;

/**
 * Durations of one operation, in nanoseconds, with their median and 90th percentile. A sample may
 * time a batch of calls (for calls too short to time one by one); results are then per call.
 */
final class LatencySamples {
    private final String operation;
    private final int callsPerSample;
    private long[] nanos;
    private int count;

    LatencySamples(String operation, int expected) {
        this(operation, expected, 1);
    }

    LatencySamples(String operation, int expected, int callsPerSample) {
        this.operation = operation;
        this.callsPerSample = callsPerSample;
        this.nanos = new long[Math.max(1, expected)];
    }

    String operation() {
        return operation;
    }

    void add(long durationNanos) {
        if (count == nanos.length) {
            nanos = Arrays.copyOf(nanos, count * 2);
        }
        nanos[count++] = durationNanos;
    }

    int count() {
        return count;
    }

    /** The value below which {@code fraction} of the samples lie (nearest rank), in microseconds. */
    double percentileMicros(double fraction) {
        if (count == 0) {
            return Double.NaN;
        }
        long[] sorted = Arrays.copyOf(nanos, count);
        Percentiles.sort(sorted, count);
        return Percentiles.nearestRank(sorted, count, fraction) / 1000.0 / callsPerSample;
    }

    double medianMicros() {
        return percentileMicros(0.5);
    }

    double p90Micros() {
        return percentileMicros(0.9);
    }
}
