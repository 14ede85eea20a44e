package dev.vmmkit.tools.replay;

import dev.vmmkit.driver.DeviceBytes;

import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.TimingDriver;
import dev.vmmkit.driver.VmmDriver;
import dev.vmmkit.driver.VmmLog;

import java.util.Optional;

/**
 * Replays through vmmkit's own allocator: a new {@link VmmManager} on one driver for each replay,
 * given streams of this process for the trace's recorded ones ({@link ReplayStreams}), whose
 * cudaFrees wait for the trace's completions ({@link VmmManager#forReplay}).
 * At {@code VMM_LOG=info} the driver's calls are timed, and {@link #driverTime} tells where the
 * measured replay's driver time went.
 */
public final class VmmBackend implements ReplayBackend {
    private final VmmDriver driver;
    private final VmmConfig config;
    /** Times the driver's calls at {@code VMM_LOG=info} ({@link #driverTime}), else null. */
    private final TimingDriver timing;

    /** A backend over {@code driver}, which it closes when closed (or at once, for a chunk size the driver cannot map). */
    public VmmBackend(VmmDriver driver, VmmConfig config) {
        if (config.chunkBytes() % driver.granularity() != 0) {
            driver.close();
            throw new IllegalArgumentException("chunk size " + config.chunkBytes() + " is not a multiple of the "
                    + driver.name() + " driver's allocation granularity (" + driver.granularity() + " bytes)");
        }
        this.timing = VmmLog.isInfo() ? new TimingDriver(driver) : null;
        this.driver = timing != null ? timing : driver;
        this.config = config;
    }

    @Override
    public String driverName() {
        return driver.name();
    }

    @Override
    public ReplayTarget newTarget() {
        if (timing != null) timing.resetTotals();
        return ReplayTarget.of(VmmManager.forReplay(driver, config), new ReplayStreams(driver.transfers()));
    }

    @Override
    public String driverTime() {
        return timing == null ? "" : timing.totals();
    }

    @Override
    public long pageBytes() {
        return config.chunkBytes() != 0 ? config.chunkBytes() : driver.granularity();
    }

    /** Only the host emulation's device addresses are host addresses. */
    @Override
    public Optional<DeviceBytes> deviceBytes() {
        try {
            return Optional.of(DeviceBytes.forDriver(driver));
        } catch (IllegalArgumentException noByteAccess) {
            return Optional.empty();
        }
    }

    @Override
    public void close() {
        driver.close();
    }
}
