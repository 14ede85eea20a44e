package dev.vmmkit.engine;

import dev.vmmkit.core.ManagedMemoryResource;
import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.VmmDriver;

import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The device the host serves on: vmmkit's allocator over the chosen driver, shared by every
 * engine instance, and the facts engines are chosen by (CUDA or not, the ordinal).
 */
final class DeviceMemory implements AutoCloseable {
    private final VmmDriver driver;
    private final VmmManager manager;
    /** What each engine worker's driver uses, as it last reported (the host emulation only: see {@link #figures}). */
    private final Map<Object, Long> workers = new ConcurrentHashMap<>();

    DeviceMemory(VmmDriver driver) {
        this.driver = driver;
        this.manager = new VmmManager(driver, VmmConfig.DEFAULTS);
    }

    ManagedMemoryResource resource() {
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

    /**
     * Used and total device memory as the driver reports them. On CUDA that is the whole device,
     * engine workers included; the host emulation is one process's memory, so the figures the
     * workers reported are added to it.
     */
    MemoryFigures figures() {
        VmmDriver.MemoryInfo info = driver.memoryInfo();
        long used = info.totalBytes() - info.freeBytes();
        if (!isCuda()) {
            for (long bytes : workers.values()) used += bytes;
        }
        return new MemoryFigures(used, info.totalBytes());
    }

    /** The driver a worker opens for itself: the host's kind and device. */
    String driverKind() {
        return driver.name();
    }

    int driverDevice() {
        return driver.device();
    }

    /**
     * The capacity of a worker's own host emulation: what the device has left now, so that a load
     * finds no memory where it would have found none in the host. Unused on CUDA (one real device).
     */
    long capacityForWorker() {
        if (isCuda()) return 0;
        MemoryFigures now = figures();
        return Math.max(1, now.totalBytes() - now.usedBytes()); // 0 would mean the default capacity
    }

    /** A worker reported what its driver uses. */
    void workerUses(Object worker, long usedBytes) {
        workers.put(worker, usedBytes);
    }

    /** A worker ended: its memory went with it. */
    void workerGone(Object worker) {
        workers.remove(worker);
    }

    /**
     * Gives the allocator's cached, unused device memory back to the driver, after waiting for
     * frees still pending (engines free device-wide, so the wait is one device synchronisation);
     * returns the bytes. A driver failure here only leaves memory cached: it is logged, not thrown,
     * so the unload or eviction that asked has still happened.
     */
    long drainCaches() {
        try {
            return manager.releaseCachedMemory();
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
