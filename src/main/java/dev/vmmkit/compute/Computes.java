package dev.vmmkit.compute;

import dev.vmmkit.compute.cuda.CudaCompute;
import dev.vmmkit.compute.host.HostCompute;
import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverAdaptor;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.VmmDriver;
import dev.vmmkit.driver.cuda.CudaModuleCalls;
import dev.vmmkit.driver.host.HostDriver;

/**
 * The one opener of {@link DeviceCompute}s: the implementation that fits the driver under any
 * adaptors, CUDA's PTX kernels for the CUDA driver, Java loops for the host emulation. Kept out of
 * the interface so that the interface names no implementation.
 */
public final class Computes {

    private Computes() {
    }

    /**
     * Kernels on {@code driver}'s device, over memory it maps. The caller closes them before the
     * driver (the driver's close does it otherwise).
     *
     * @throws DriverException CUDA_ERROR_NOT_SUPPORTED when the driver runs no kernels
     */
    public static DeviceCompute open(VmmDriver driver) {
        if (DriverAdaptor.innermost(driver) instanceof HostDriver host) {
            return new HostCompute(host);
        }
        return CudaModuleCalls.of(driver).<DeviceCompute>map(CudaCompute::open).orElseThrow(() ->
                DriverException.of(CudaResult.NOT_SUPPORTED, "Computes.open: driver '" + driver.name() + "' runs no kernels"));
    }
}
