package dev.vmmkit.driver.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import org.junit.jupiter.api.Test;

import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverException;

/** On a machine without the NVIDIA driver, CudaDriver must say so plainly and never crash. */
class CudaDriverWithoutGpuTest {

    @Test
    void isNotAvailableWithoutLibcuda() {
        assumeFalse(CudaApi.isLoaded(), "libcuda present");
        assertFalse(CudaDriver.isAvailable());
        assertFalse(CudaDriver.isAvailable(), "asking twice is fine too");
    }

    @Test
    void openFailsWithAClearDriverException() {
        assumeFalse(CudaApi.isLoaded(), "libcuda present");
        DriverException e = assertThrows(DriverException.class, () -> CudaDriver.open(0));
        assertEquals(CudaResult.NO_DEVICE, e.result());
        assertEquals("open(device=0)", e.call());
        assertTrue(e.driverMessage().startsWith("libcuda.so.1 not found: no NVIDIA driver on this machine"),
                e.getMessage());
        // A second attempt reports the same, rather than a NoClassDefFoundError from a failed initialiser.
        assertThrows(DriverException.class, () -> CudaDriver.open(0));
    }
}
