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
    /**
     * Device memory value meaning "all the device has": no cap on a GPU, the emulation's default
     * size ({@link HostDriver#DEFAULT_CAPACITY}) on the host.
     */
    public static final long WHOLE_DEVICE = 0;

    private Drivers() {
    }

    /** As {@link #open(DriverKind, int, long)}, with the kind given by name and the whole device. */
    public static VmmDriver open(String kind, int device) {
        return open(DriverKind.parse(kind), device, WHOLE_DEVICE);
    }

    /**
     * Opens a driver on {@code device} with {@code deviceMemoryBytes} of device memory for vmmkit
     * ({@code --device-memory}, {@code VMM_DEVICE_MEMORY}; {@link #WHOLE_DEVICE}: all there is). The
     * host emulation is made that large; a GPU is capped there by a {@link DeviceMemoryCap}.
     *
     * @throws DriverException when CUDA was asked for and cannot be opened
     */
    public static VmmDriver open(DriverKind kind, int device, long deviceMemoryBytes) {
        if (deviceMemoryBytes < 0) throw new IllegalArgumentException("device memory must not be negative: " + deviceMemoryBytes);
        VmmDriver driver = switch (kind) {
            case HOST -> host(device, deviceMemoryBytes);
            case CUDA -> cuda(device, deviceMemoryBytes);
            case AUTO -> CudaDriver.isAvailable() ? cuda(device, deviceMemoryBytes) : host(device, deviceMemoryBytes);
        };
        if (VmmLog.isDebug()) {
            VmmLog.routeDebugToStderr(LoggingDriver.LOGGER_NAME, "vmmkit driver: ");
            return new LoggingDriver(driver);
        }
        return driver;
    }

    private static VmmDriver host(int device, long capacityBytes) {
        HostDriver.Builder builder = HostDriver.builder().device(device);
        if (capacityBytes != WHOLE_DEVICE) builder.capacity(capacityBytes);
        return builder.build();
    }

    private static VmmDriver cuda(int device, long capBytes) {
        CudaDriver driver = CudaDriver.open(device);
        return capBytes == WHOLE_DEVICE ? driver : new DeviceMemoryCap(driver, capBytes);
    }
}
