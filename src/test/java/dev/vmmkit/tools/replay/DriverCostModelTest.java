package dev.vmmkit.tools.replay;

import dev.vmmkit.driver.CountingDriver;
import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.DriverHandleCounts;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** Handles are counted per call kind (a range of N handles counts N) and priced by their size. */
class DriverCostModelTest {
    private static final long MIB = 1L << 20;

    @Test
    void aRangeOfHandlesCountsEachHandleAndIsPricedPerHandle() {
        try (HostDriver host = HostDriver.builder().build()) {
            CountingDriver driver = new CountingDriver(host);
            long va = driver.reserve(8 * MIB, 0);
            long[] handles = new long[3];
            for (int i = 0; i < 2; i++) {
                handles[i] = driver.create(2 * MIB);
                driver.map(va + i * 2 * MIB, 2 * MIB, handles[i]);
            }
            handles[2] = driver.create(4 * MIB);
            driver.map(va + 4 * MIB, 4 * MIB, handles[2]);
            driver.setAccess(va, 8 * MIB);
            driver.unmap(va, 8 * MIB);
            for (long h : handles) driver.release(h);
            driver.addressFree(va, 8 * MIB);

            DriverHandleCounts counts = driver.handleCounts();
            assertEquals(1, driver.count(DriverCall.SET_ACCESS));
            assertEquals(3, counts.handles(DriverCall.SET_ACCESS), "one setAccess over three handles");
            assertEquals(3, counts.handles(DriverCall.UNMAP));
            assertEquals(3, counts.handles(DriverCall.CREATE));
            assertEquals(3, counts.handles(DriverCall.RELEASE));
            // The measured medians (GPU-FACTS.md), per handle: create, map, setAccess, unmap, release.
            // 2 MiB is a measured size; 4 MiB lies log10(2) of the way (log-wise) from 2 MiB to 20 MiB.
            double twoMiB = 5.7 + 0.5 + 16.5 + 11.8 + 7.4;
            double t = Math.log10(2);
            double fourMiB = (5.7 + t * (8.5 - 5.7)) + 0.5 + (16.5 + t * (16.6 - 16.5)) + 11.8
                    + (7.4 + t * (10.4 - 7.4));
            assertEquals(2 * twoMiB + fourMiB, DriverCostModel.micros(counts) - reserveAndFree(counts), 1e-9);
        }
    }

    @Test
    void costsInterpolateBetweenMeasuredSizes() {
        double[] setAccess = {16.5, 16.6, 34.2, 46.0, 80.8};
        assertEquals(16.5, DriverCostModel.costAt(setAccess, MIB), "below the smallest: flat");
        assertEquals(34.2, DriverCostModel.costAt(setAccess, 64 * MIB), 1e-9);
        assertEquals(80.8, DriverCostModel.costAt(setAccess, 8L << 30), "above the largest: flat");
        // 128 MiB is a third of the way, log-wise, from 64 MiB to 512 MiB (2 of 8 is 1 of 3 doublings).
        assertEquals(34.2 + (46.0 - 34.2) / 3, DriverCostModel.costAt(setAccess, 128 * MIB), 1e-9);
    }

    /** Reserve and address-free are not handles: the model prices none. */
    private static double reserveAndFree(DriverHandleCounts counts) {
        return 0.4 * counts.handles(DriverCall.RESERVE) + 0.3 * counts.handles(DriverCall.ADDRESS_FREE);
    }
}
