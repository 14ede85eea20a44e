package dev.vmmkit.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class LatencySamplesTest {

    @Test
    void medianAndP90AreNearestRank() {
        LatencySamples samples = new LatencySamples("op", 2);
        for (int i = 10; i >= 1; i--) {
            samples.add(i * 1000L); // 1..10 us, added out of order and past the initial capacity
        }
        assertEquals(10, samples.count());
        assertEquals(5.0, samples.medianMicros());
        assertEquals(9.0, samples.p90Micros());
    }

    @Test
    void batchedSamplesReportPerCall() {
        LatencySamples samples = new LatencySamples("trivial", 1, 100);
        samples.add(7_000); // 100 calls in 7 us
        assertEquals(0.07, samples.medianMicros(), 1e-9);
    }
}
