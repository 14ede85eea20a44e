package dev.vmmkit.driver.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import org.junit.jupiter.api.Test;

import dev.vmmkit.driver.CallText;
import dev.vmmkit.driver.DriverException;

class CudaErrorsTest {

    @Test
    void hexLooksLikeC() {
        assertEquals("0x200000", CallText.hex(2L << 20));
        assertEquals("0x0", CallText.hex(0));
        assertEquals("0xffffffffffffffff", CallText.hex(-1));
    }

    @Test
    void failureNamesTheCallTheCodeAndTheText() {
        // Without libcuda the text is vmmkit's own; with it, cuGetErrorString's.
        DriverException e = CudaErrors.failure(2, "cuMemCreate(size=0x200000, device=0)");
        assertEquals(2, e.result());
        assertEquals("CUDA_ERROR_OUT_OF_MEMORY", e.resultName());
        assertEquals("cuMemCreate(size=0x200000, device=0)", e.call());
        String prefix = "cuMemCreate(size=0x200000, device=0) -> CUDA_ERROR_OUT_OF_MEMORY (2): ";
        assertTrue(e.getMessage().startsWith(prefix), e.getMessage());
        if (!CudaApi.isLoaded()) {
            assertEquals(prefix + "out of memory", e.getMessage());
        }
    }

    @Test
    void fallsBackToBuiltInTextWithoutLibcuda() {
        assumeFalse(CudaApi.isLoaded(), "libcuda present: the driver supplies the text");
        assertEquals("invalid argument", CudaErrors.message(1));
        assertEquals("unknown error", CudaErrors.message(12345));
    }
}
