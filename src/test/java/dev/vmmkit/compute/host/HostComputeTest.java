package dev.vmmkit.compute.host;

import dev.vmmkit.compute.Computes;
import dev.vmmkit.compute.DeviceCompute;
import dev.vmmkit.driver.host.HostDriver;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.CudaResult;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The host emulation's kernels on values worked out by hand, and a bad address refused, not crashed on. */
class HostComputeTest {
    private static final long PAGE = 64 << 10;
    private HostDriver driver;
    private DeviceCompute compute;
    private long va;
    private long handle;

    @BeforeEach
    void mapOnePage() {
        driver = HostDriver.builder().granularity(PAGE).capacity(16 * PAGE).build();
        compute = Computes.open(driver);
        va = driver.reserve(PAGE, 0);
        handle = driver.create(PAGE);
        driver.mapWithAccess(va, PAGE, handle);
    }

    @AfterEach
    void unmap() {
        driver.unmap(va, PAGE);
        driver.release(handle);
        driver.addressFree(va, PAGE);
        driver.close();
    }

    private long at(int floatIndex) {
        return va + 4L * floatIndex;
    }

    private float[] read(int floatIndex, int count) {
        float[] out = new float[count];
        compute.copyToHost(out, at(floatIndex));
        return out;
    }

    @Test
    void matmulWithAndWithoutTransposes() {
        compute.copyFromHost(at(0), new float[] {1, 2, 3, 4, 5, 6});      // a: [2, 3]
        compute.copyFromHost(at(16), new float[] {1, 0, 0, 1, 1, 1});     // b: [3, 2]
        compute.matmul(at(32), at(0), at(16), 2, 2, 3, 3, 1, 2, 1);
        assertArrayEquals(new float[] {4, 5, 10, 11}, read(32, 4));
        // a^T @ a: [3, 2] @ [2, 3] through strides
        compute.matmul(at(48), at(0), at(0), 3, 3, 2, 1, 3, 3, 1);
        assertArrayEquals(new float[] {17, 22, 27, 22, 29, 36, 27, 36, 45}, read(48, 9));
    }

    @Test
    void broadcastingSumsAndRelu() {
        compute.copyFromHost(at(0), new float[] {1, -2, 3, -4, 5, -6});
        compute.copyFromHost(at(8), new float[] {10, 20, 30});
        compute.add(at(16), at(0), at(8), 6, 3);
        assertArrayEquals(new float[] {11, 18, 33, 6, 25, 24}, read(16, 6));
        compute.sumRows(at(24), at(0), 2, 3);
        assertArrayEquals(new float[] {-3, 3, -3}, read(24, 3));
        compute.relu(at(32), at(0), 6);
        assertArrayEquals(new float[] {1, 0, 3, 0, 5, 0}, read(32, 6));
        compute.axpy(at(8), at(8), 3, -0.5f);
        assertArrayEquals(new float[] {5, 10, 15}, read(8, 3));
    }

    @Test
    void crossEntropyOfUniformLogitsIsLogOfTheClassCount() {
        compute.fill(at(0), 6, 0.25f);                                   // two rows of three equal logits
        compute.copyFromHost(at(8), new float[] {0, 2});
        compute.softmaxCrossEntropy(at(16), at(0), at(8), 2, 3);
        assertEquals((float) Math.log(3), read(16, 1)[0], 1e-6f);
        compute.fill(at(17), 1, 1f);
        compute.softmaxCrossEntropyBackward(at(24), at(17), at(0), at(8), 2, 3);
        float third = 1f / 3 / 2;
        assertArrayEquals(new float[] {third - 0.5f, third, third, third, third, third - 0.5f}, read(24, 6), 1e-6f);
        compute.copyFromHost(at(8), new float[] {0, 3});                 // class 3 of 3: out of range
        compute.softmaxCrossEntropy(at(16), at(0), at(8), 2, 3);
        assertTrue(Float.isNaN(read(16, 1)[0]));
    }

    @Test
    void anAddressOutsideTheMappingsIsAnErrorNotACrash() {
        DriverException e = assertThrows(DriverException.class, () -> compute.fill(va + PAGE, 4, 1f));
        assertEquals(CudaResult.ILLEGAL_ADDRESS, e.result());
        assertTrue(e.getMessage().contains("fill(address="), e.getMessage());
    }
}
