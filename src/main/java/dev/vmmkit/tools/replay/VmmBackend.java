package dev.vmmkit.tools.replay;

import dev.vmmkit.core.AllocatorStats;
import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.VmmDriver;

import java.util.Optional;

/** Replays through vmmkit's own allocator: a new {@link VmmManager} on one driver for each replay. */
final class VmmBackend implements ReplayBackend {
    private final VmmDriver driver;
    private final VmmConfig config;

    VmmBackend(VmmDriver driver, VmmConfig config) {
        this.driver = driver;
        this.config = config;
    }

    @Override
    public String driverName() {
        return driver.name();
    }

    @Override
    public ReplayTarget newTarget() {
        VmmManager manager = new VmmManager(driver, config);
        return new ReplayTarget() {
            @Override
            public DeviceMemoryResource resource() {
                return manager;
            }

            @Override
            public AllocatorStats stats() {
                return manager.stats();
            }

            @Override
            public void close() {
                manager.close();
            }
        };
    }

    /** Only the host emulation's device addresses are host addresses. */
    @Override
    public Optional<DeviceBytes> deviceBytes() {
        return "host".equals(driver.name()) ? Optional.of(HostDeviceBytes.INSTANCE) : Optional.empty();
    }

    @Override
    public void close() {
        driver.close();
    }
}
