package dev.vmmkit.engine;

import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.core.OutOfDeviceMemoryException;
import dev.vmmkit.core.VmmManager;
import org.agrona.collections.Long2LongHashMap;

/**
 * The device memory one engine instance took through alloc_device: what it holds now, whether a
 * request failed for lack of memory, and {@link #freeAll} for what the engine did not give back.
 * Thread-safe (a concurrent engine may call back from several threads).
 */
final class InstanceMemory {
    private static final long NOT_OURS = -1;

    private final DeviceMemoryResource resource;
    private final Long2LongHashMap sizes = new Long2LongHashMap(NOT_OURS);
    private long bytes;
    private boolean outOfMemorySeen;
    /** Bytes held plus the request that first found no memory: the least this instance needs. */
    private long neededWhenOutOfMemory;

    InstanceMemory(DeviceMemoryResource resource) {
        this.resource = resource;
    }

    /** Device memory for the engine, or 0 when there is none to give (the engine sees NULL). */
    long allocate(long size) {
        if (size <= 0) return 0;
        long address;
        try {
            address = resource.allocate(size, 0);
        } catch (OutOfDeviceMemoryException e) {
            synchronized (this) {
                if (!outOfMemorySeen) neededWhenOutOfMemory = bytes + size;
                outOfMemorySeen = true;
            }
            return 0;
        }
        synchronized (this) {
            sizes.put(address, size);
            bytes += size;
        }
        return address;
    }

    /**
     * Gives back memory the engine took. The engine may still have work queued on its own streams
     * that the host cannot see, so the memory waits for all earlier device work (cudaFree's rule).
     *
     * @return false for an address this instance does not hold (nothing is freed)
     */
    boolean free(long address) {
        synchronized (this) {
            long size = sizes.remove(address);
            if (size == NOT_OURS) return false;
            bytes -= size;
        }
        resource.deallocate(address, VmmManager.DEVICE_WIDE_STREAM);
        return true;
    }

    /** Frees whatever the engine still holds; returns the bytes freed. */
    long freeAll() {
        long[] addresses;
        long freed;
        synchronized (this) {
            addresses = new long[sizes.size()];
            int i = 0;
            for (Long2LongHashMap.KeyIterator it = sizes.keySet().iterator(); it.hasNext(); ) {
                addresses[i++] = it.nextValue();
            }
            freed = bytes;
        }
        for (long address : addresses) free(address);
        return freed;
    }

    synchronized long bytes() {
        return bytes;
    }

    /** True once an allocation failed for lack of device memory. */
    /** The bytes held when a request first found no memory, plus that request; 0 before then. */
    synchronized long neededWhenOutOfMemory() {
        return neededWhenOutOfMemory;
    }

    synchronized boolean outOfMemorySeen() {
        return outOfMemorySeen;
    }
}
