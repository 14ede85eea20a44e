package dev.vmmkit.core;

import java.util.function.LongFunction;

/**
 * A manager's {@link DeviceWideFreeClock}, read from the region that holds the freed address: a
 * free's mark is what its region had published right after it (its own sequence, or a later
 * free's), and the region covers the mark with the synchronisation that covers the free. An
 * address no region holds any more has nothing to wait for. The waits given up are the fence's.
 */
final class RegionFreeClock implements DeviceWideFreeClock {
    private final LongFunction<RegionHeap> regionOf;
    private final DeviceWideFence fence;

    RegionFreeClock(LongFunction<RegionHeap> regionOf, DeviceWideFence fence) {
        this.regionOf = regionOf;
        this.fence = fence;
    }

    @Override
    public long markAfterFree(long address) {
        RegionHeap region = regionOf.apply(address);
        return region == null ? Long.MIN_VALUE : region.freeLists.deviceWidePublished();
    }

    @Override
    public boolean covered(long address, long mark) {
        RegionHeap region = regionOf.apply(address);
        return region == null || region.freeLists.deviceWideCovered() >= mark;
    }

    @Override
    public long waitsGivenUp() {
        return fence.givenUpWaits().onThisThread();
    }
}
