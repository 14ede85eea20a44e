package dev.vmmkit.driver.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.StreamEvents;

/** Runs only where a GPU is visible; skipped elsewhere. */
class CudaDriverGpuTest {
    private CudaDriver driver;

    @BeforeEach
    void open() {
        assumeTrue(CudaDriver.isAvailable(), "no CUDA device here");
        driver = CudaDriver.open(0);
    }

    @AfterEach
    void close() {
        if (driver != null) {
            driver.close();
        }
    }

    @Test
    void granularityIsAPowerOfTwo() {
        long g = driver.granularity();
        assertTrue(g > 0 && Long.bitCount(g) == 1, "granularity " + g);
    }

    @Test
    void mappedMemoryHoldsWhatIsWritten() {
        long g = driver.granularity();
        long va = driver.reserve(4 * g, 0);
        long handle = driver.create(2 * g);
        try {
            driver.mapWithAccess(va + g, 2 * g, handle);
            CudaMemcpy copy = new CudaMemcpy(driver);
            long[] values = {1, -2, 0x1234_5678_9abc_def0L, Long.MIN_VALUE};
            copy.writeLongs(va + g + 8, values);
            assertArrayEquals(values, copy.readLongs(va + g + 8, values.length));
            copy.fill(va + g, 2 * g, 7);
            assertEquals(-1, copy.firstMismatch(va + g, 2 * g, 7));
            driver.unmap(va + g, 2 * g);
        } finally {
            driver.release(handle);
            driver.addressFree(va, 4 * g);
        }
    }

    @Test
    void oneHandleMappedTwiceShowsTheSameBytes() {
        long g = driver.granularity();
        long va = driver.reserve(2 * g, 0);
        long handle = driver.create(g);
        try {
            driver.mapWithAccess(va, g, handle);
            driver.mapWithAccess(va + g, g, handle);
            CudaMemcpy copy = new CudaMemcpy(driver);
            copy.writeLongs(va, new long[] {42});
            assertArrayEquals(new long[] {42}, copy.readLongs(va + g, 1));
            driver.unmap(va, 2 * g);
        } finally {
            driver.release(handle);
            driver.addressFree(va, 2 * g);
        }
    }

    @Test
    void badSizeIsADriverExceptionNamingTheCall() {
        DriverException e = assertThrows(DriverException.class, () -> driver.create(1));
        assertNotEquals(CudaResult.SUCCESS, e.result());
        assertTrue(e.call().startsWith("cuMemCreate(size=0x1, device=0)"), e.getMessage());
    }

    @Test
    void invalidOrdinalIsRefused() {
        DriverException e = assertThrows(DriverException.class, () -> CudaDriver.open(CudaDriver.deviceCount()));
        assertEquals(CudaResult.INVALID_DEVICE, e.result());
    }

    @Test
    void memoryInfoIsPlausible() {
        var info = driver.memoryInfo();
        assertTrue(info.totalBytes() > 0 && info.freeBytes() <= info.totalBytes(), info.toString());
    }

    @Test
    void eventsCompleteOnAnIdleStream() {
        StreamEvents events = driver.events();
        long event = events.create();
        try {
            events.record(event, 0);
            events.synchronize(event);
            assertTrue(events.isComplete(event));
        } finally {
            events.destroy(event);
        }
    }

    @Test
    void worksOnAThreadWithoutAContext() throws Exception {
        long[] granted = new long[1];
        Thread thread = new Thread(() -> {
            long va = driver.reserve(driver.granularity(), 0);
            granted[0] = driver.currentContext();
            driver.addressFree(va, driver.granularity());
        });
        thread.start();
        thread.join();
        assertEquals(driver.primaryContext(), granted[0]);
    }

    @Test
    void closedDriverRefusesCalls() {
        driver.close();
        DriverException e = assertThrows(DriverException.class, () -> driver.create(driver.granularity()));
        assertEquals(CudaResult.DEINITIALIZED, e.result());
        driver.close(); // idempotent
        driver = null;
    }
}
