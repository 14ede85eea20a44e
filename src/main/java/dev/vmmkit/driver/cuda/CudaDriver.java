package dev.vmmkit.driver.cuda;

import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.VmmDriver;

/**
 * PLACEHOLDER, replaced at merge by the real CUDA driver (branch {@code cuda}). It exists only so
 * that {@link dev.vmmkit.driver.Drivers} compiles on this branch: it reports that CUDA is
 * unavailable and refuses to open. The real class keeps these two signatures.
 */
public abstract class CudaDriver implements VmmDriver {

    private CudaDriver() {
    }

    /** True when libcuda loads and at least one device is present. The placeholder: never. */
    public static boolean isAvailable() {
        return false;
    }

    /** Opens {@code device}. The placeholder: always fails as a machine without libcuda would. */
    public static CudaDriver open(int device) {
        throw new DriverException(CudaResult.NOT_INITIALIZED, "libcuda.so.1 could not be loaded", "cuInit(0)");
    }
}
