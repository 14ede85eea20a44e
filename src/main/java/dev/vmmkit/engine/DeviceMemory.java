package dev.vmmkit.engine;

import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.VmmDriver;

import java.util.List;

/**
 * The device the host serves on: vmmkit's allocator over the chosen driver, shared by every
 * engine instance, and the facts engines are chosen by (CUDA or not, the ordinal).
 */
final class DeviceMemory implements AutoCloseable {
    private final VmmDriver driver;
    private final VmmManager manager;

    DeviceMemory(VmmDriver driver) {
        this.driver = driver;
        this.manager = new VmmManager(driver, VmmConfig.DEFAULTS);
    }

    DeviceMemoryResource resource() {
        return manager;
    }

    /** True on a CUDA device; the host emulation counts as none. */
    boolean isCuda() {
        return driver.name().equals("cuda");
    }

    /** Backends in the order the host prefers them: cuda first when a CUDA device is present. */
    List<String> backends() {
        return isCuda() ? List.of("cuda", "cpu") : List.of("cpu");
    }

    /**
     * The {@code EngineConfig.device} every engine is given: the CUDA device its alloc_device memory
     * lives on, or -1 when there is none (then that memory is host-addressable), whatever the
     * engine's backend: a cpu engine on a GPU machine must know it cannot touch that memory directly.
     */
    int engineDevice() {
        return isCuda() ? driver.device() : -1;
    }

    /** Used and total device memory as the driver reports them. */
    MemoryFigures figures() {
        VmmDriver.MemoryInfo info = driver.memoryInfo();
        return new MemoryFigures(info.totalBytes() - info.freeBytes(), info.totalBytes());
    }

    /**
     * Gives the allocator's cached, unused device memory back to the driver, after waiting for
     * frees still pending (engines free device-wide, so the wait is one device synchronisation);
     * returns the bytes. A driver failure here only leaves memory cached: it is logged, not thrown,
     * so the unload or eviction that asked has still happened.
     */
    long drainCaches() {
        try {
            return manager.drainWaitingForFrees();
        } catch (DriverException e) {
            EngineHost.LOGGER.log(System.Logger.Level.WARNING, "cached device memory stays cached: " + e.getMessage());
            return 0;
        }
    }

    /** Frees everything the allocator holds; the driver stays open (its owner closes it). */
    @Override
    public void close() {
        manager.close();
    }
}
