package dev.vmmkit.driver;

import dev.vmmkit.core.OutOfDeviceMemoryException;
import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The cap {@code --device-memory} puts on a GPU, shown over a much larger host emulation: creates past
 * it fail as a full device's would, released and imported handles are counted as a device counts
 * them, and the allocator above sees a device of the cap's size.
 */
class DeviceMemoryCapTest {
    private static final long PAGE = 2L << 20;
    private final HostDriver device = HostDriver.builder().granularity(PAGE).capacity(64 * PAGE).build();
    private final DeviceMemoryCap capped = new DeviceMemoryCap(device, 4 * PAGE);

    @AfterEach
    void close() {
        capped.close();
    }

    @Test
    void createsPastTheCapAreOutOfMemoryAndAReleaseMakesRoom() {
        List<Long> handles = new ArrayList<>();
        for (int i = 0; i < 4; i++) handles.add(capped.create(PAGE));
        DriverException full = assertThrows(DriverException.class, () -> capped.create(PAGE));
        assertEquals(CudaResult.OUT_OF_MEMORY, full.result());
        assertTrue(full.getMessage().contains("device memory cap 0x800000"), full.getMessage());
        assertEquals(new VmmDriver.MemoryInfo(0, 4 * PAGE), capped.memoryInfo());
        capped.release(handles.removeFirst());
        assertEquals(new VmmDriver.MemoryInfo(PAGE, 4 * PAGE), capped.memoryInfo());
        handles.add(capped.create(PAGE));
        for (long handle : handles) capped.release(handle);
        assertEquals(new VmmDriver.MemoryInfo(4 * PAGE, 4 * PAGE), capped.memoryInfo());
    }

    @Test
    void aCreateTheDeviceRefusesTakesNoRoom() {
        assertThrows(DriverException.class, () -> capped.create(PAGE + 1), "not a multiple of the granularity");
        for (int i = 0; i < 4; i++) capped.create(PAGE);
    }

    @Test
    void importedMemoryBelongsToTheExportersDevice() {
        try (HostDriver exporter = HostDriver.builder().granularity(PAGE).capacity(64 * PAGE).device(1).build()) {
            long exported = exporter.create(4 * PAGE);
            int fd = exporter.exportHandle(exported);
            long imported = capped.importHandle(fd, 4 * PAGE);
            Descriptors.close(fd);
            long own = capped.create(4 * PAGE);
            capped.release(imported);
            assertThrows(DriverException.class, () -> capped.create(PAGE), "the release of an import frees no room");
            capped.release(own);
            exporter.release(exported);
        }
    }

    @Test
    void concurrentCreatesNeverPassTheCap() throws InterruptedException {
        int threads = 8;
        CountDownLatch start = new CountDownLatch(1);
        ConcurrentLinkedQueue<Long> made = new ConcurrentLinkedQueue<>();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            workers.add(Thread.ofPlatform().start(() -> {
                try {
                    start.await();
                    made.add(capped.create(PAGE));
                } catch (DriverException | InterruptedException refused) {
                    // the device was full for this one
                }
            }));
        }
        start.countDown();
        for (Thread worker : workers) worker.join();
        assertEquals(4, made.size());
        assertEquals(4 * PAGE, device.usage().aliveBytes());
    }

    @Test
    void theAllocatorAboveSeesAFullDeviceAtTheCap() {
        try (VmmManager manager = new VmmManager(capped, VmmConfig.DEFAULTS.withAddressSpaceBytes(64 * PAGE))) {
            long first = manager.allocate(3 * PAGE, 0);
            assertThrows(OutOfDeviceMemoryException.class, () -> manager.allocate(2 * PAGE, 0));
            manager.deallocate(first, 0);
            manager.deallocate(manager.allocate(4 * PAGE, 0), 0);
        }
    }

    @Test
    void aCapNotAboveZeroIsRefused() {
        assertThrows(IllegalArgumentException.class, () -> new DeviceMemoryCap(device, 0));
    }
}
