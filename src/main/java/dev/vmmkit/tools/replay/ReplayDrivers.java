package dev.vmmkit.tools.replay;

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

    /**
     * Opens the driver. Wired at merge: the driver factory and the host emulation are landing on
     * another branch. The intended body is
     * <pre>{@code
     * return switch (kind) {
     *     case HOST -> HostDriver.builder().capacity(hostCapacityBytes).build();
     *     case CUDA -> Drivers.open("cuda", device);
     *     case AUTO -> Drivers.open("auto", device);   // host emulation with hostCapacityBytes when no GPU
     * };
     * }</pre>
     */
    static VmmDriver openDriver(DriverKind kind, int device, long hostCapacityBytes) {
        // wired at merge
        throw new UnsupportedOperationException("the " + kind.name().toLowerCase()
                + " driver is not available in this build yet (driver factory not merged)");
    }
}
