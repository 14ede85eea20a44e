package dev.vmmkit.tools.demo;

import dev.vmmkit.compute.Computes;
import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.VmmDriver;
import dev.vmmkit.lifetime.LeakDetector;
import dev.vmmkit.lifetime.TensorDevice;

/** Opens the tensor device the demos run on: a driver, vmmkit's allocator over it, kernels on its device (timed). */
final class DemoDevice {
    private DemoDevice() {
    }

    /** The device and its allocator, closed together by the device's close. */
    record Opened(TensorDevice device, VmmManager manager, VmmDriver driver, TimedCompute timing) {
    }

    /** Builds the device over {@code driver}, which it then owns (closed here when building fails). */
    static Opened open(VmmDriver driver) {
        VmmManager manager;
        TimedCompute timing;
        try {
            timing = new TimedCompute(Computes.open(driver));
            manager = new VmmManager(driver, VmmConfig.fromEnvironment());
        } catch (RuntimeException e) {
            driver.close();
            throw e;
        }
        TensorDevice device = new TensorDevice(manager, timing, LeakDetector.Level.fromEnvironment(), () -> {
            try {
                timing.close();
                manager.close();
            } finally {
                driver.close();
            }
        });
        return new Opened(device, manager, driver, timing);
    }
}
