package dev.vmmkit.tools.replay;

import dev.vmmkit.driver.Drivers;
import dev.vmmkit.driver.cuda.CudaDriver;
import dev.vmmkit.driver.host.HostDriver;

import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.driver.VmmDriver;

/** The one place where {@code vmmkit replay} opens a driver. */
public final class ReplayDrivers {

    private ReplayDrivers() {
    }

    /** Opens the driver asked for and returns a backend that makes a {@code VmmManager} per replay. */
    public static ReplayBackend open(DriverKind kind, int device, long hostCapacityBytes, VmmConfig config) {
        return new VmmBackend(openDriver(kind, device, hostCapacityBytes), config);
    }

    /** Opens the driver: the host emulation gets {@code hostCapacityBytes}, also when "auto" finds no GPU. */
    static VmmDriver openDriver(DriverKind kind, int device, long hostCapacityBytes) {
        return switch (kind) {
            case HOST -> HostDriver.builder().capacity(hostCapacityBytes).device(device).build();
            case CUDA -> Drivers.open("cuda", device);
            case AUTO -> CudaDriver.isAvailable()
                    ? Drivers.open("cuda", device)
                    : HostDriver.builder().capacity(hostCapacityBytes).device(device).build();
        };
    }
}
