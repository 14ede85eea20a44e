package dev.vmmkit.interpose;

import org.junit.jupiter.api.Test;

import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

class DeviceManagersTest {

    @Test
    void aFactoryThatServesNoDeviceMeansPassThroughAndIsAskedOnce() {
        AtomicInteger asked = new AtomicInteger();
        DeviceManagers managers = new DeviceManagers(device -> {
            asked.incrementAndGet();
            return null; // monitor mode's factory
        });
        assertNull(managers.forDevice(0));
        assertNull(managers.forDevice(0));
        assertNull(managers.owner(0x1000, 0));
        assertEquals(1, asked.get());
        managers.close();
    }
}
