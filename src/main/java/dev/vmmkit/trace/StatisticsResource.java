package dev.vmmkit.trace;

import dev.vmmkit.core.AllocatorStats;
import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.core.ManagedMemoryResource;

import java.util.Map;
import java.util.function.LongSupplier;

/**
 * An adaptor that counts the requests it forwards (as RMM's statistics_resource_adaptor does), for
 * a resource that keeps no figures of its own, e.g. the CUDA runtime's stream-ordered allocator.
 * Live and peak bytes come from the requests; reserved bytes from {@code reservedBytes} (0 when the
 * resource cannot say). Every request takes the ledger's lock: not for the hot path of production.
 */
public final class StatisticsResource implements ManagedMemoryResource {
    private final DeviceMemoryResource resource;
    private final LongSupplier reservedBytes;
    private final Runnable onClose;
    private final RequestLedger ledger = new RequestLedger();
    private long peakReservedBytes;

    /**
     * @param reservedBytes the memory the resource holds now, read after each allocation
     * @param onClose       gives everything back (the resource's own close)
     */
    public StatisticsResource(DeviceMemoryResource resource, LongSupplier reservedBytes, Runnable onClose) {
        this.resource = resource;
        this.reservedBytes = reservedBytes;
        this.onClose = onClose;
    }

    @Override
    public long allocate(long size, long stream) {
        long address = resource.allocate(size, stream);
        if (address != 0) {
            ledger.allocated(address, size);
            long reserved = reservedBytes.getAsLong();
            synchronized (this) {
                peakReservedBytes = Math.max(peakReservedBytes, reserved);
            }
        }
        return address;
    }

    @Override
    public void deallocate(long address, long stream) {
        resource.deallocate(address, stream);
        ledger.freed(address);
    }

    /** True for a live allocation this adaptor forwarded. */
    @Override
    public boolean owns(long address) {
        return ledger.sizeOf(address) >= 0;
    }

    @Override
    public long sizeOf(long address) {
        return ledger.sizeOf(address);
    }

    @Override
    public AllocatorStats stats() {
        long reserved = reservedBytes.getAsLong();
        synchronized (this) {
            peakReservedBytes = Math.max(peakReservedBytes, reserved);
            return new AllocatorStats(ledger.allocations(), ledger.frees(), ledger.liveBytes(), ledger.peakLiveBytes(),
                    reserved, peakReservedBytes, Math.max(0, reserved - ledger.liveBytes()), 0, 0, 0, Map.of());
        }
    }

    @Override
    public void close() {
        onClose.run();
    }
}
