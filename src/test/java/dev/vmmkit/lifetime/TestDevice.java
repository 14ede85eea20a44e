package dev.vmmkit.lifetime;

import dev.vmmkit.compute.Computes;
import dev.vmmkit.compute.DeviceCompute;
import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.host.HostDriver;

import java.util.function.Function;

/**
 * A tensor device on the host emulation for tests: a small-granularity host driver under a
 * VmmManager, leak detection as asked. Closing it closes the manager and the driver.
 */
final class TestDevice {
    private TestDevice() {
    }

    static TensorDevice open(LeakDetector.Level level) {
        return open(reclaimer -> new LeakDetector(level, reclaimer));
    }

    /**
     * A device whose paranoid leak detector's records are never enqueued, as if the JVM's reference
     * handler were too slow to get to them before the check: only a check that does not wait on the
     * reference queue finds its leaks.
     */
    static TensorDevice openWithoutReferenceQueue() {
        return open(reclaimer -> new LeakDetector(LeakDetector.Level.PARANOID, 1, reclaimer, null));
    }

    private static TensorDevice open(Function<LeakDetector.Reclaimer, LeakDetector> leakDetector) {
        HostDriver driver = HostDriver.builder().granularity(64 << 10).capacity(1L << 30).build();
        VmmManager manager = new VmmManager(driver, VmmConfig.DEFAULTS.withAddressSpaceBytes(1L << 30));
        DeviceCompute compute = Computes.open(driver);
        return new TensorDevice(manager, compute, leakDetector, () -> {
            try {
                compute.close();
                manager.close();
            } finally {
                driver.close();
            }
        });
    }

    static TensorDevice open() {
        return open(LeakDetector.Level.PARANOID);
    }
}
