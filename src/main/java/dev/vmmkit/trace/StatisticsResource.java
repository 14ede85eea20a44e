package dev.vmmkit.trace;

import dev.vmmkit.core.AllocatorStats;
import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.core.ManagedMemoryResource;

import java.util.Map;
import java.util.function.LongSupplier;

/**
 * An adaptor that counts the requests it forwards (as RMM's statistics_resource_adaptor does), for
 * a resource that keeps no figures of its own, e.g. the CUDA runtime's stream-ordered allocator.
 * Live and peak bytes come from the requests; reserved bytes and their peak from the resource,
 * read only when {@link #stats} is asked (so requests stay as fast as the resource). Every request
 * takes the ledger's lock: not for the hot path of production.
 */
public final class StatisticsResource implements ManagedMemoryResource {
    private final DeviceMemoryResource resource;
    private final LongSupplier reservedBytes;
    private final LongSupplier peakReservedBytes;
    private final Runnable onClose;
    private final RequestLedger ledger = new RequestLedger();

    /**
     * @param reservedBytes     the memory the resource holds now (0 when it cannot say)
     * @param peakReservedBytes the most it held
     * @param onClose           gives everything back, after this adaptor freed what is still live
     */
    public StatisticsResource(DeviceMemoryResource resource, LongSupplier reservedBytes, LongSupplier peakReservedBytes,
                              Runnable onClose) {
        this.resource = resource;
        this.reservedBytes = reservedBytes;
        this.peakReservedBytes = peakReservedBytes;
        this.onClose = onClose;
    }

    @Override
    public long allocate(long size, long stream) {
        long address = resource.allocate(size, stream);
        if (address != 0) ledger.allocated(address, size);
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
        return new AllocatorStats(ledger.allocations(), ledger.frees(), ledger.liveBytes(), ledger.peakLiveBytes(),
                reserved, peakReservedBytes.getAsLong(), Math.max(0, reserved - ledger.liveBytes()), 0, 0, 0, Map.of());
    }

    /** Frees what is still live (on stream 0), then closes the resource. */
    @Override
    public void close() {
        for (long address : ledger.liveAddresses()) resource.deallocate(address, 0);
        onClose.run();
    }
}
