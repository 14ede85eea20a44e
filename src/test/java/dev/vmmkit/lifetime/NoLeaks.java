package dev.vmmkit.lifetime;

import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Fails a test when the leak detectors of this JVM report any leak during it: after the test, the
 * collector runs and the given device's detector polls its queue. Tests that make leaks on purpose
 * say so with {@link #expect(long)}. Use with {@code @RegisterExtension}.
 */
final class NoLeaks implements BeforeEachCallback, AfterEachCallback {
    private final java.util.function.Supplier<TensorDevice> device;
    private long before;
    private long expected;

    NoLeaks(java.util.function.Supplier<TensorDevice> device) {
        this.device = device;
    }

    /** This test leaks {@code count} tensors on purpose. */
    void expect(long count) {
        expected = count;
    }

    @Override
    public void beforeEach(ExtensionContext context) {
        before = LeakDetector.totalLeakCount();
        expected = 0;
    }

    @Override
    public void afterEach(ExtensionContext context) {
        TensorDevice d = device.get();
        if (d != null) collectLeaks(d);
        assertEquals(expected, LeakDetector.totalLeakCount() - before,
                "tensors leaked (unreachable with a reference count above zero); see the LEAK reports on stderr");
    }

    /** Runs the collector so that the device's detector finds every tensor lost by now. */
    static void collectLeaks(TensorDevice device) {
        device.leakDetector().collectAndCheck();
    }
}
