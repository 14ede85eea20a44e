package dev.vmmkit.driver;

import dev.vmmkit.driver.cuda.CudaDriver;
import dev.vmmkit.driver.host.HostDriver;

/**
 * The one driver opener, used by every command that opens a device ({@code replay}, {@code run},
 * {@code serve}, {@code demo}, {@code driver-bench}, {@code driver-check}) and by the interposer: {@code cuda}, {@code host} (the emulation) or
 * {@code auto} (CUDA when libcuda and a device are present, else host). At {@code VMM_LOG=debug}
 * (see {@link VmmLog}) the driver comes wrapped in a {@link LoggingDriver}.
 */
public final class Drivers {
    /** Host capacity value meaning "the emulation's default" ({@link HostDriver#DEFAULT_CAPACITY}). */
    public static final long DEFAULT_HOST_CAPACITY = 0;

    private Drivers() {
    }

    /** As {@link #open(DriverKind, int, long)}, with the kind given by name and the default host capacity. */
    public static VmmDriver open(String kind, int device) {
        return open(DriverKind.parse(kind), device, DEFAULT_HOST_CAPACITY);
    }

    /**
     * Opens a driver on {@code device}. The host emulation, also when {@code auto} finds no GPU,
     * holds {@code hostCapacityBytes} of device memory ({@link #DEFAULT_HOST_CAPACITY}: its default).
     *
     * @throws DriverException when CUDA was asked for and cannot be opened
     */
    public static VmmDriver open(DriverKind kind, int device, long hostCapacityBytes) {
        VmmDriver driver = switch (kind) {
            case HOST -> host(device, hostCapacityBytes);
            case CUDA -> CudaDriver.open(device);
            case AUTO -> CudaDriver.isAvailable() ? CudaDriver.open(device) : host(device, hostCapacityBytes);
        };
        if (VmmLog.isDebug()) {
            VmmLog.routeDriverDebugToStderr();
            return new LoggingDriver(driver);
        }
        return driver;
    }

    private static VmmDriver host(int device, long capacityBytes) {
        HostDriver.Builder builder = HostDriver.builder().device(device);
        if (capacityBytes != DEFAULT_HOST_CAPACITY) builder.capacity(capacityBytes);
        return builder.build();
    }
}
