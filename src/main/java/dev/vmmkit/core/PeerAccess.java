package dev.vmmkit.core;

import dev.vmmkit.driver.DeviceSet;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.VmmDriver;

import java.util.function.Supplier;

/**
 * Which other devices may read and write one manager's memory (peer access). On CUDA a VMM mapping
 * is reachable only by the devices its cuMemSetAccess named, so enabling a peer must touch every
 * mapping that exists, and every mapping made later must name the peer too.
 *
 * <p>{@link #grant} and {@link #revoke} change the set first, so that runs mapped from then on get
 * the new access at once ({@link #openNewRun}), then visit each region under its lock with one
 * setAccess per run of contiguously mapped pages. A grant that fails part way is rolled back: the
 * peer leaves the set and loses access wherever it had got it. Grants and revocations are rare;
 * they are serialised by one lock of their own and never block allocations on other regions.
 */
public final class PeerAccess {
    private final VmmDriver driver;
    private final long own;
    private final Supplier<RegionHeap[]> regions;
    private final Object changeLock = new Object();
    private volatile long peers = DeviceSet.NONE;

    PeerAccess(VmmDriver driver, Supplier<RegionHeap[]> regions) {
        this.driver = driver;
        this.own = DeviceSet.of(driver.device());
        this.regions = regions;
    }

    /** The peers granted now (a {@link DeviceSet}); the manager's own device is not in it. */
    public long peers() {
        return peers;
    }

    /**
     * Gives {@code peer} read/write access to every mapping of this manager, now and later.
     * Granting a peer twice does nothing.
     *
     * @throws IllegalArgumentException for the manager's own device or an ordinal out of range
     * @throws DriverException when a setAccess fails; the grant is then undone
     */
    public void grant(int peer) {
        long bit = peerBit(peer);
        synchronized (changeLock) {
            if ((peers & bit) != 0) return;
            peers |= bit;
            try {
                applyToEveryRun(bit, DeviceSet.NONE);
            } catch (RuntimeException failure) {
                peers &= ~bit;
                try {
                    applyToEveryRun(DeviceSet.NONE, bit);
                } catch (RuntimeException rollbackFailure) {
                    failure.addSuppressed(rollbackFailure);
                }
                throw failure;
            }
        }
    }

    /** Takes {@code peer}'s access away from every mapping; later mappings do not name it. */
    public void revoke(int peer) {
        long bit = peerBit(peer);
        synchronized (changeLock) {
            if ((peers & bit) == 0) return;
            peers &= ~bit;
            applyToEveryRun(DeviceSet.NONE, bit);
        }
    }

    /**
     * Gives access to a run the caller just mapped: the own device and every peer, in one call.
     * Called under the lock of the region that maps it.
     */
    void openNewRun(long va, long size) {
        long granted = peers;
        if (granted == DeviceSet.NONE) {
            driver.setAccess(va, size);
        } else {
            driver.setAccess(va, size, own | granted, DeviceSet.NONE);
        }
    }

    private void applyToEveryRun(long grant, long revoke) {
        for (RegionHeap region : regions.get()) {
            region.forEachMappedRun((va, size) -> driver.setAccess(va, size, grant, revoke));
        }
    }

    private long peerBit(int peer) {
        if (peer < 0 || peer >= DeviceSet.MAX_DEVICES || DeviceSet.of(peer) == own) {
            throw new IllegalArgumentException("device " + peer + " cannot be a peer of device "
                    + Long.numberOfTrailingZeros(own));
        }
        return DeviceSet.of(peer);
    }
}
