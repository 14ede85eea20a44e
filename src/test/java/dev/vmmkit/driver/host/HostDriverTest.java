package dev.vmmkit.driver.host;

import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.DeviceBytes;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class HostDriverTest {
    private static final long G = HostDriver.DEFAULT_GRANULARITY;

    private final HostDriver driver = HostDriver.builder().capacity(8 * G).device(3).build();
    private final DeviceBytes bytes = driver.deviceBytes();

    @AfterEach
    void close() {
        driver.close();
    }

    @Test
    void reportsItsSettings() {
        assertEquals("host", driver.name());
        assertEquals(3, driver.device());
        assertEquals(G, driver.granularity());
        assertEquals(new HostDriver.MemoryInfo(8 * G, 8 * G), driver.memoryInfo());
        HostDriver defaults = HostDriver.open();
        try (defaults) {
            assertEquals(HostDriver.DEFAULT_CAPACITY, defaults.memoryInfo().totalBytes());
            assertEquals(0, defaults.device());
        }
    }

    @Test
    void capacityCountsLiveHandlesAndRefusesPastIt() {
        long a = driver.create(4 * G);
        long b = driver.create(3 * G);
        assertEquals(G, driver.memoryInfo().freeBytes());
        DriverException full = expect(CudaResult.OUT_OF_MEMORY, () -> driver.create(2 * G));
        assertTrue(full.isOutOfMemory());
        assertTrue(full.getMessage().contains("cuMemCreate(size=0x400000"), full.getMessage());
        assertEquals(7 * G, driver.usage().aliveBytes(), "a refused create takes nothing");
        long c = driver.create(G); // exactly to the brim
        assertEquals(0, driver.memoryInfo().freeBytes());
        driver.release(a);
        driver.release(b);
        driver.release(c);
        assertEquals(8 * G, driver.memoryInfo().freeBytes());
    }

    @Test
    void handlesAreSmallIncreasingIdsNeverReused() {
        long first = driver.create(G);
        driver.release(first);
        long second = driver.create(G);
        assertTrue(second > first);
        assertTrue(second < 100, "an id, not a file descriptor or pointer");
        driver.release(second);
    }

    @Test
    void releaseWhileMappedKeepsDataAndCapacityUntilTheLastUnmap() {
        long va = driver.reserve(2 * G, 0);
        long handle = driver.create(G);
        driver.mapWithAccess(va, G, handle);
        driver.mapWithAccess(va + G, G, handle);
        bytes.fill(va, G, 5);
        driver.release(handle);
        assertEquals(-1, bytes.firstMismatch(va + G, G, 5));
        assertEquals(7 * G, driver.memoryInfo().freeBytes(), "still counted while mapped");
        expect(CudaResult.INVALID_VALUE, () -> driver.release(handle));
        expect(CudaResult.INVALID_VALUE, () -> driver.map(va, G, handle));
        driver.unmap(va, G);
        assertEquals(7 * G, driver.memoryInfo().freeBytes(), "one mapping remains");
        assertEquals(-1, bytes.firstMismatch(va + G, G, 5));
        driver.unmap(va + G, G);
        assertEquals(8 * G, driver.memoryInfo().freeBytes());
        assertEquals(new HostDriver.Usage(1, 0, 0, 0), driver.usage());
        driver.addressFree(va, 2 * G);
        assertTrue(driver.usage().isEmpty());
    }

    @Test
    void newMemoryReadsZeroAndUnmappedMemoryIsNotAccessible() {
        long va = driver.reserve(G, 0);
        long handle = driver.create(G);
        driver.map(va, G, handle);
        assertFalse(driver.isAccessible(va, G), "map grants no access");
        assertThrows(IllegalStateException.class, () -> bytes.readLong(va), "refused, not a crash");
        driver.setAccess(va, G);
        assertTrue(driver.isAccessible(va, G));
        assertEquals(0, bytes.readLong(va + G - 8));
        driver.unmap(va, G);
        assertFalse(driver.isAccessible(va, 8));
        assertThrows(IllegalStateException.class, () -> bytes.writeLong(va, 1));
        driver.release(handle);
        driver.addressFree(va, G);
    }

    @Test
    void reserveHonoursAlignment() {
        long alignment = 64 * G;
        long va = driver.reserve(3 * G, alignment);
        assertEquals(0, va % alignment);
        long small = driver.reserve(G, 4096); // below the granularity: the granularity wins
        assertEquals(0, small % G);
        expect(CudaResult.INVALID_VALUE, () -> driver.reserve(G, 3 * G));
        expect(CudaResult.INVALID_VALUE, () -> driver.reserve(G, -G));
        driver.addressFree(va, 3 * G);
        driver.addressFree(small, G);
    }

    @Test
    void refusesBadInputWithInvalidValueAndChangesNothing() {
        long va = driver.reserve(4 * G, 0);
        long handle = driver.create(2 * G);
        driver.mapWithAccess(va, 2 * G, handle);
        bytes.fill(va, 2 * G, 9);
        HostDriver.Usage before = driver.usage();

        expect(CudaResult.INVALID_VALUE, () -> driver.reserve(-G, 0));
        expect(CudaResult.INVALID_VALUE, () -> driver.reserve(Long.MAX_VALUE & -G, 0)); // size + slack overflows
        expect(CudaResult.INVALID_VALUE, () -> driver.create(G + 4096));
        expect(CudaResult.INVALID_VALUE, () -> driver.create(-G));
        expect(CudaResult.INVALID_VALUE, () -> driver.map(va + 2 * G, 2 * G, 12345));           // unknown handle
        expect(CudaResult.INVALID_VALUE, () -> driver.map(va + G, 2 * G, handle));              // overlaps
        expect(CudaResult.INVALID_VALUE, () -> driver.map(va + 3 * G, 2 * G, driver.create(2 * G))); // runs past the end
        expect(CudaResult.INVALID_VALUE, () -> driver.map(Long.MAX_VALUE & -G, 2 * G, handle)); // no reservation
        expect(CudaResult.INVALID_VALUE, () -> driver.setAccess(va, G));                        // part of a mapping
        expect(CudaResult.INVALID_VALUE, () -> driver.unmap(va + G, G));
        expect(CudaResult.INVALID_VALUE, () -> driver.unmap(va, 3 * G));
        expect(CudaResult.INVALID_VALUE, () -> driver.addressFree(va, 4 * G));                  // still mapped
        expect(CudaResult.INVALID_VALUE, () -> driver.addressFree(va + G, 3 * G));              // not a reservation
        expect(CudaResult.INVALID_VALUE, () -> driver.addressFree(va, 2 * G));
        expect(CudaResult.INVALID_VALUE, () -> driver.release(12345));

        assertEquals(before.reservations(), driver.usage().reservations());
        assertEquals(before.mappings(), driver.usage().mappings());
        assertEquals(-1, bytes.firstMismatch(va, 2 * G, 9));
        driver.unmap(va, 2 * G);
        driver.release(handle);
        driver.addressFree(va, 4 * G);
    }

    @Test
    void anOsFailureBecomesOutOfMemoryWithErrnoInTheMessage() {
        // 2^60 bytes exceed any process address space: mmap fails with ENOMEM.
        DriverException e = expect(CudaResult.OUT_OF_MEMORY, () -> driver.reserve(1L << 60, 0));
        assertTrue(e.getMessage().contains("errno 12"), e.getMessage());
        assertTrue(e.isOutOfMemory());
        assertTrue(driver.usage().isEmpty());
    }

    @Test
    void messagesNameTheCallAndItsArguments() {
        long va = driver.reserve(G, 0);
        DriverException e = expect(CudaResult.INVALID_VALUE, () -> driver.map(va, G, 77));
        assertEquals("cuMemMap(va=0x" + Long.toHexString(va) + ", size=0x200000, offset=0x0, handle=0x4d)", e.call());
        assertTrue(e.getMessage().contains("CUDA_ERROR_INVALID_VALUE (1)"), e.getMessage());
        assertTrue(e.getMessage().contains("unknown handle"), e.getMessage());
        driver.addressFree(va, G);
    }

    @Test
    void closeGivesEverythingBackAndLaterCallsAreDeinitialized() {
        long va = driver.reserve(2 * G, 0);
        long handle = driver.create(G);
        driver.mapWithAccess(va, G, handle);
        long event = driver.events().create();
        driver.close();
        driver.close(); // idempotent
        assertTrue(driver.usage().isEmpty());
        assertFalse(driver.isAccessible(va, G));
        expect(CudaResult.DEINITIALIZED, () -> driver.reserve(G, 0));
        expect(CudaResult.DEINITIALIZED, () -> driver.unmap(va, G));
        expect(CudaResult.DEINITIALIZED, () -> driver.release(handle));
        expect(CudaResult.DEINITIALIZED, driver::memoryInfo);
        expect(CudaResult.DEINITIALIZED, () -> driver.events().isComplete(event));
    }

    @Test
    void manyThreadsMapAndUnmapAtOnce() throws Exception {
        try (HostDriver shared = HostDriver.builder().capacity(64 * G).build();
             ExecutorService pool = Executors.newFixedThreadPool(4)) {
            DeviceBytes sharedBytes = shared.deviceBytes();
            List<Future<?>> work = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                long seed = t;
                work.add(pool.submit(() -> {
                    for (int i = 0; i < 50; i++) {
                        long va = shared.reserve(2 * G, 0);
                        long handle = shared.create(2 * G);
                        shared.mapWithAccess(va, 2 * G, handle);
                        sharedBytes.fill(va, 4096, seed + i);
                        assertEquals(-1, sharedBytes.firstMismatch(va, 4096, seed + i));
                        shared.unmap(va, 2 * G);
                        shared.release(handle);
                        shared.addressFree(va, 2 * G);
                    }
                    return null;
                }));
            }
            for (Future<?> f : work) {
                f.get();
            }
            assertTrue(shared.usage().isEmpty(), shared.usage().toString());
        }
    }

    @Test
    void builderRefusesBadSettings() {
        assertThrows(IllegalArgumentException.class, () -> HostDriver.builder().granularity(3 * G));
        assertThrows(IllegalArgumentException.class, () -> HostDriver.builder().granularity(512));
        assertThrows(IllegalArgumentException.class, () -> HostDriver.builder().capacity(-1));
        assertThrows(IllegalArgumentException.class, () -> HostDriver.builder().device(-1));
    }

    private static DriverException expect(int code, Executable call) {
        DriverException e = assertThrows(DriverException.class, call);
        assertEquals(code, e.result(), e.getMessage());
        assertNotEquals("", e.call());
        return e;
    }
}
