package dev.vmmkit.tools.replay;

import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.DriverHandleCounts;

import java.util.Map;

/**
 * A model of the GPU driver time of a replay, priced per handle touched with the medians measured
 * on an H200 (driver 580, CUDA 13; GPU-FACTS.md): setAccess and unmap cost per handle in the range,
 * create and release per handle, by handle size (log-linear between the measured sizes). A model,
 * not a measurement: it lets a host replay estimate what the same calls cost on the GPU.
 */
public final class DriverCostModel {
    /** Handle sizes the costs were measured at: 2 MiB, 20 MiB, 64 MiB, 512 MiB, 2 GiB. */
    private static final double[] SIZES = {2L << 20, 20L << 20, 64L << 20, 512L << 20, 2L << 30};
    /** Microseconds per handle at each size. */
    private static final Map<DriverCall, double[]> MICROS = Map.of(
            DriverCall.RESERVE, new double[]{0.4, 0.4, 1.3, 1.4, 1.9},
            DriverCall.CREATE, new double[]{5.7, 8.5, 6.2, 17.1, 18.1},
            DriverCall.MAP, new double[]{0.5, 0.5, 0.5, 0.6, 0.7},
            DriverCall.SET_ACCESS, new double[]{16.5, 16.6, 34.2, 46.0, 80.8},
            DriverCall.UNMAP, new double[]{11.8, 11.8, 19.0, 23.3, 35.9},
            DriverCall.RELEASE, new double[]{7.4, 10.4, 19.0, 107.0, 398.6},
            DriverCall.ADDRESS_FREE, new double[]{0.3, 0.4, 1.5, 1.7, 2.1});

    private DriverCostModel() {
    }

    /** Modelled microseconds of all the virtual-memory calls counted in {@code handles}. */
    public static double micros(DriverHandleCounts handles) {
        double[] total = new double[1];
        for (Map.Entry<DriverCall, double[]> e : MICROS.entrySet()) {
            double[] costs = e.getValue();
            handles.forEachBucket(e.getKey(), (count, meanBytes) -> total[0] += count * costAt(costs, meanBytes));
        }
        return total[0];
    }

    /** The cost of one handle of {@code bytes}: log-linear between measured sizes, flat outside them. */
    static double costAt(double[] costs, double bytes) {
        if (bytes <= SIZES[0]) return costs[0];
        for (int i = 1; i < SIZES.length; i++) {
            if (bytes <= SIZES[i]) {
                double t = Math.log(bytes / SIZES[i - 1]) / Math.log(SIZES[i] / SIZES[i - 1]);
                return costs[i - 1] + t * (costs[i] - costs[i - 1]);
            }
        }
        return costs[costs.length - 1];
    }
}
