package dev.vmmkit.interpose;

import dev.vmmkit.core.AllocatorStats;
import dev.vmmkit.core.ManagedMemoryResource;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * One allocator per device, made on the device's first allocation. A device whose allocator could
 * not be made is remembered as failed, so its calls pass through to the real runtime from then on.
 */
final class DeviceManagers implements AutoCloseable {
    static final int MAX_DEVICES = 64;

    private final ResourceFactory factory;
    private final AtomicReferenceArray<ManagedMemoryResource> byDevice = new AtomicReferenceArray<>(MAX_DEVICES);
    private final boolean[] failed = new boolean[MAX_DEVICES];

    DeviceManagers(ResourceFactory factory) {
        this.factory = factory;
    }

    /** The allocator of {@code device}, made if needed; null when the device cannot have one. */
    ManagedMemoryResource forDevice(int device) {
        if (device < 0 || device >= MAX_DEVICES) return null;
        ManagedMemoryResource resource = byDevice.get(device);
        return resource != null ? resource : open(device);
    }

    private synchronized ManagedMemoryResource open(int device) {
        ManagedMemoryResource resource = byDevice.get(device);
        if (resource != null || failed[device]) return resource;
        try {
            resource = factory.open(device);
            byDevice.set(device, resource);
            InterposeLog.info("device " + device + ": allocator ready");
        } catch (Throwable e) {
            failed[device] = true;
            InterposeLog.warnOnce("open-" + device, "device " + device
                    + ": cannot make the allocator, its calls go to the CUDA runtime", e);
        }
        return resource;
    }

    /**
     * The allocator that handed out {@code address}: the current device's first (the usual case),
     * then the others, since a program may free after switching devices. Null when none did.
     */
    ManagedMemoryResource owner(long address, int currentDevice) {
        if (currentDevice >= 0 && currentDevice < MAX_DEVICES) {
            ManagedMemoryResource current = byDevice.get(currentDevice);
            if (current != null && current.owns(address)) return current;
        }
        for (int device = 0; device < MAX_DEVICES; device++) {
            ManagedMemoryResource other = byDevice.get(device);
            if (device != currentDevice && other != null && other.owns(address)) return other;
        }
        return null;
    }

    /** Stats of every device that has an allocator. */
    List<AllocatorStats> stats() {
        List<AllocatorStats> all = new ArrayList<>();
        for (int device = 0; device < MAX_DEVICES; device++) {
            ManagedMemoryResource resource = byDevice.get(device);
            if (resource != null) all.add(resource.stats());
        }
        return all;
    }

    @Override
    public void close() {
        for (int device = 0; device < MAX_DEVICES; device++) {
            ManagedMemoryResource resource = byDevice.getAndSet(device, null);
            if (resource != null) resource.close();
        }
    }
}
