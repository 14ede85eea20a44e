package dev.vmmkit.engine;

import dev.vmmkit.core.OutOfDeviceMemoryException;
import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The count of an engine's own CUDA allocations, over a real allocator on the host emulation. */
class OwnCudaMemoryTest {
    private static final long MIB = 1 << 20;

    @Test
    void countsLiveBytesThroughAllocateFreeAndResizeAndRemembersTheFirstRequestThatFoundNoMemory() {
        try (HostDriver driver = HostDriver.builder().capacity(16 * MIB).build();
             VmmManager manager = new VmmManager(driver, VmmConfig.DEFAULTS)) {
            OwnCudaMemory own = new OwnCudaMemory(manager);
            long a = own.allocate(3 * MIB, 0);
            long b = own.allocate(1000, 0);
            assertEquals(3 * MIB + 1000, own.bytes());
            long moved = own.reallocate(a, 5 * MIB, 0);
            assertEquals(5 * MIB + 1000, own.bytes());
            own.deallocate(b, VmmManager.DEVICE_WIDE_STREAM);
            assertEquals(5 * MIB, own.bytes());
            assertThrows(RuntimeException.class, () -> own.deallocate(b, 0), "a double free is refused");
            assertEquals(5 * MIB, own.bytes(), "and counts nothing");
            assertEquals(0, own.neededWhenOutOfMemory());

            assertThrows(OutOfDeviceMemoryException.class, () -> own.allocate(64 * MIB, 0));
            assertEquals(5 * MIB + 64 * MIB, own.neededWhenOutOfMemory(), "what it held, plus the request");
            assertThrows(OutOfDeviceMemoryException.class, () -> own.allocate(32 * MIB, 0));
            assertEquals(69 * MIB, own.neededWhenOutOfMemory(), "the first such request is the one kept");

            own.deallocate(moved, VmmManager.DEVICE_WIDE_STREAM);
            assertEquals(0, own.bytes());
            own.close();
            assertEquals(0, manager.stats().liveBytes());
            assertTrue(manager.allocate(MIB, 0) != 0, "closing the adaptor leaves the allocator open, to its owner");
        }
    }
}
