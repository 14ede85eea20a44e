package dev.vmmkit.driver.conformance;

import dev.vmmkit.driver.DeviceBytes;

import dev.vmmkit.driver.VmmDriver;

import java.util.function.Supplier;

/**
 * What the conformance checks run against.
 *
 * @param driver             the driver under test; checks give back everything they take from it
 * @param bytes              reads and writes the driver's device memory
 * @param freshDriver        opens another driver of the same kind, which a check may close
 *                           (null: the closed-driver check is skipped)
 * @param oomProbeLimitBytes the most physical memory the out-of-memory check may allocate to reach
 *                           out of memory; it is skipped when the device has more free
 */
public record ConformanceTarget(VmmDriver driver, DeviceBytes bytes, Supplier<VmmDriver> freshDriver,
                                long oomProbeLimitBytes) {

    /** A target whose byte access comes from the driver itself ({@link DeviceBytes#forDriver}). */
    public static ConformanceTarget of(VmmDriver driver, Supplier<VmmDriver> freshDriver, long oomProbeLimitBytes) {
        return new ConformanceTarget(driver, DeviceBytes.forDriver(driver), freshDriver, oomProbeLimitBytes);
    }
}
