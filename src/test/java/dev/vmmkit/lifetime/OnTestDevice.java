package dev.vmmkit.lifetime;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.extension.RegisterExtension;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

/**
 * Base of tests that run on a fresh paranoid {@link TestDevice} each: after each test every byte
 * must be back and no leak reported.
 */
abstract class OnTestDevice {
    protected TensorDevice device;

    @RegisterExtension
    final NoLeaks noLeaks = new NoLeaks(() -> device);

    @BeforeEach
    void openDevice() {
        device = TestDevice.open();
    }

    @AfterEach
    void closeDevice() {
        boolean scopeLeftOpen = Scope.current() != null;
        while (Scope.current() != null) Scope.current().close(); // none is left to the next test
        assertFalse(scopeLeftOpen, "the test left a scope open");
        assertEquals(0, device.liveBytes(), "every test gives all its memory back");
        device.close();
    }
}
