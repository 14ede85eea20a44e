package dev.vmmkit.driver;

import dev.vmmkit.driver.cuda.CudaDriver;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class DriversTest {

    @Test
    void hostAndAutoWithoutCudaOpenTheEmulation() {
        try (VmmDriver host = Drivers.open("host", 2)) {
            assertInstanceOf(HostDriver.class, DriverAdaptor.innermost(host));
            assertEquals(2, host.device());
        }
        assumeFalse(CudaDriver.isAvailable(), "CUDA is present: auto opens it");
        try (VmmDriver auto = Drivers.open("AUTO", 0)) {
            assertEquals("host", auto.name());
        }
    }

    @Test
    void cudaWithoutADriverIsAClearDriverException() {
        assumeFalse(CudaDriver.isAvailable(), "CUDA is present");
        DriverException e = assertThrows(DriverException.class, () -> Drivers.open("cuda", 0));
        assertEquals(CudaResult.NO_DEVICE, e.result());
        assertTrue(e.getMessage().contains("libcuda"), e.getMessage());
    }

    @Test
    void deviceMemoryIsTheEmulationsSize() {
        try (VmmDriver host = Drivers.open(DriverKind.HOST, 0, 64L << 20);
             VmmDriver whole = Drivers.open(DriverKind.HOST, 0, Drivers.WHOLE_DEVICE)) {
            assertEquals(64L << 20, host.memoryInfo().totalBytes());
            assertEquals(HostDriver.DEFAULT_CAPACITY, whole.memoryInfo().totalBytes());
        }
        assertThrows(IllegalArgumentException.class, () -> Drivers.open(DriverKind.HOST, 0, -1));
    }

    @Test
    void unknownKindsAreRefused() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Drivers.open("opencl", 0));
        assertTrue(e.getMessage().contains("cuda, host or auto"), e.getMessage());
    }

    @Test
    void debugLoggingWrapsTheDriverAndStillForwards() {
        System.setProperty("vmmkit.log", "debug");
        try (VmmDriver driver = Drivers.open("host", 0)) {
            LoggingDriver logging = assertInstanceOf(LoggingDriver.class, driver);
            assertInstanceOf(HostDriver.class, logging.delegate());
            long va = driver.reserve(driver.granularity(), 0);
            assertThrows(DriverException.class, () -> driver.addressFree(va + 1, 1), "failures pass through");
            driver.addressFree(va, driver.granularity());
            long event = driver.events().create();
            driver.events().record(event, 0);
            assertTrue(driver.events().isComplete(event));
            driver.events().destroy(event);
        } finally {
            System.clearProperty("vmmkit.log");
        }
    }
}
