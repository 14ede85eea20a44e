package dev.vmmkit.driver;

import org.agrona.collections.Long2LongHashMap;

/**
 * A driver whose device holds at most {@code capBytes} of physical memory for vmmkit: what
 * {@code --device-memory} and {@code VMM_DEVICE_MEMORY} mean on a real GPU, as the capacity does on the
 * host emulation. A {@link #create} that would pass the cap fails with CUDA_ERROR_OUT_OF_MEMORY, as a
 * full device would, so the allocator's out-of-memory path runs; {@link #memoryInfo} reports no more
 * than the cap. Counted: handles made by {@code create}, until their {@code release}. Imported handles
 * belong to the exporter's device and do not count, as on the emulation. The rest of the device
 * (other processes, cuBLAS's workspace) is not vmmkit's and not limited.
 */
public final class DeviceMemoryCap extends ForwardingDriver {
    private static final long NOT_COUNTED = -1;

    private final long capBytes;
    /** Size of each handle {@code create} made and that was not released yet. */
    private final Long2LongHashMap createdSizes = new Long2LongHashMap(NOT_COUNTED);
    private long heldBytes;

    /** @throws IllegalArgumentException when {@code capBytes} is not above 0 */
    public DeviceMemoryCap(VmmDriver delegate, long capBytes) {
        super(delegate);
        if (capBytes <= 0) throw new IllegalArgumentException("device memory cap must be above 0: " + capBytes);
        this.capBytes = capBytes;
    }

    @Override
    public long create(long size, boolean exportable) {
        synchronized (this) {
            if (size > capBytes - heldBytes) {
                throw new DriverException(CudaResult.OUT_OF_MEMORY, CudaResult.describe(CudaResult.OUT_OF_MEMORY)
                        + ": device memory cap " + CallText.hex(capBytes) + ", in use " + CallText.hex(heldBytes),
                        CallText.create(size, device(), exportable));
            }
            heldBytes += size; // before the call, so that two creates cannot both pass the last room
        }
        long handle;
        try {
            handle = delegate.create(size, exportable);
        } catch (RuntimeException e) {
            synchronized (this) {
                heldBytes -= size;
            }
            throw e;
        }
        synchronized (this) {
            createdSizes.put(handle, size);
        }
        return handle;
    }

    @Override
    public void release(long handle) {
        delegate.release(handle);
        synchronized (this) {
            long size = createdSizes.remove(handle);
            if (size != NOT_COUNTED) heldBytes -= size;
        }
    }

    @Override
    public MemoryInfo memoryInfo() {
        MemoryInfo device = delegate.memoryInfo();
        long room;
        synchronized (this) {
            room = capBytes - heldBytes;
        }
        return new MemoryInfo(Math.min(device.freeBytes(), room), Math.min(device.totalBytes(), capBytes));
    }

    /** The cap given. */
    public long capBytes() {
        return capBytes;
    }
}
