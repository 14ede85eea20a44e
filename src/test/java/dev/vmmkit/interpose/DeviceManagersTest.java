package dev.vmmkit.interpose;

import dev.vmmkit.core.CaptureUnderwayException;
import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.DryDriver;
import org.junit.jupiter.api.Test;

import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

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

    /**
     * A device's allocator made while a stream capture is under way (the program's first allocation
     * on that device during the capture) counts it as the others do: no pause runs there until the
     * capture ends.
     */
    @Test
    void anAllocatorMadeDuringACaptureCountsIt() {
        DeviceManagers managers = new DeviceManagers(device -> new VmmManager(new DryDriver(2 << 20, 1L << 30), VmmConfig.DEFAULTS));
        try {
            VmmManager device0 = (VmmManager) managers.forDevice(0);
            managers.captureChanged(true);
            assertTrue(device0.streamCaptures().underway());
            VmmManager device1 = (VmmManager) managers.forDevice(1); // made during the capture
            assertTrue(device1.streamCaptures().underway(), "the capture under way is counted by an allocator made during it");
            device1.beginTagRegion("kv_cache", false);
            device1.allocate(4 << 20, 0);
            device1.endTagRegion();
            assertThrows(CaptureUnderwayException.class, () -> device1.pause("kv_cache"));
            managers.captureChanged(false);
            assertFalse(device0.streamCaptures().underway());
            assertFalse(device1.streamCaptures().underway(), "and its end");
            device1.pause("kv_cache");
            device1.resume("kv_cache");
            managers.captureChanged(false); // an end with none under way changes nothing
            VmmManager device2 = (VmmManager) managers.forDevice(2);
            assertFalse(device2.streamCaptures().underway());
        } finally {
            managers.close();
        }
    }
}
