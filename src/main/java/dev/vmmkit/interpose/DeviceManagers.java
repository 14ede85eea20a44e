package dev.vmmkit.interpose;

import dev.vmmkit.core.ManagedMemoryResource;
import dev.vmmkit.core.MemoryTagControl;
import dev.vmmkit.core.PeerAccess;
import dev.vmmkit.core.StreamCaptures;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * One allocator per device, made on the device's first allocation. A device whose allocator could
 * not be made is remembered as failed, so its calls pass through to the real runtime from then on.
 *
 * <p>Peer access is kept per owning device: {@link #enablePeer} grants the accessing device on the
 * owner's allocator, or, when the owner has none yet, remembers the grant and applies it when the
 * allocator is made. Stream captures are kept the same way: every allocator counts each capture
 * under way, one made during a capture included; and the default memory tag, set on every allocator
 * and on each one made later.
 */
final class DeviceManagers implements AutoCloseable {
    static final int MAX_DEVICES = 64;

    private final ResourceFactory factory;
    private final AtomicReferenceArray<ManagedMemoryResource> byDevice = new AtomicReferenceArray<>(MAX_DEVICES);
    private final boolean[] failed = new boolean[MAX_DEVICES];
    /** Per owning device, the devices granted peer access (bit sets); guarded by this. */
    private final long[] peersOf = new long[MAX_DEVICES];
    /** Stream captures under way in the process, as the shim reports them; guarded by this. */
    private int capturesUnderway;
    /** The tag allocations outside every region carry (null: none), and its setting; guarded by this. */
    private String defaultTag;
    private boolean defaultTagKeeps;
    /** One past the highest device that has an allocator: where a search by address, or over every allocator, stops. */
    private volatile int devicesOpened;

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
            if (resource == null) { // a factory that serves no device (monitor mode): pass through, quietly
                failed[device] = true;
                return null;
            }
            applyRememberedPeers(device, resource);
            StreamCaptures captures = resource.streamCaptures();
            if (captures != null) captures.adopt(capturesUnderway);
            MemoryTagControl tags = resource.tagControl();
            if (defaultTag != null && tags != null) tags.setDefaultTag(defaultTag, defaultTagKeeps);
            byDevice.set(device, resource);
            devicesOpened = Math.max(devicesOpened, device + 1);
            InterposeLog.info("device " + device + ": allocator ready");
        } catch (Throwable e) {
            failed[device] = true;
            InterposeLog.warnOnce("open-" + device, "device " + device
                    + ": cannot make the allocator, its calls go to the CUDA runtime", e);
        }
        return resource;
    }

    /**
     * The allocator that handed out {@code address}: the current device's first when the caller
     * knows it, then the others, since a program may free after switching devices; a negative
     * {@code currentDevice} (the shim's frees do not ask the runtime) searches every device that has
     * an allocator. Null when none did.
     */
    ManagedMemoryResource owner(long address, int currentDevice) {
        if (currentDevice >= 0 && currentDevice < MAX_DEVICES) {
            ManagedMemoryResource current = byDevice.get(currentDevice);
            if (current != null && current.owns(address)) return current;
        }
        for (int device = 0, opened = devicesOpened; device < opened; device++) {
            ManagedMemoryResource other = byDevice.get(device);
            if (device != currentDevice && other != null && other.owns(address)) return other;
        }
        return null;
    }

    /**
     * Lets {@code accessor} read and write the memory of {@code owner} (cudaDeviceEnablePeerAccess
     * called on {@code accessor} for peer {@code owner}), or takes that away when {@code enable} is false.
     *
     * @throws IllegalArgumentException for an ordinal out of range or a device that is its own peer
     * @throws dev.vmmkit.driver.DriverException when the grant fails (it is then undone)
     */
    synchronized void enablePeer(int accessor, int owner, boolean enable) {
        if (accessor < 0 || accessor >= MAX_DEVICES || owner < 0 || owner >= MAX_DEVICES || accessor == owner) {
            throw new IllegalArgumentException("device " + accessor + " cannot be a peer of device " + owner);
        }
        ManagedMemoryResource resource = byDevice.get(owner);
        PeerAccess access = resource == null ? null : resource.peerAccess();
        if (access != null) {
            if (enable) access.grant(accessor);
            else access.revoke(accessor);
        }
        long bit = 1L << accessor;
        peersOf[owner] = enable ? peersOf[owner] | bit : peersOf[owner] & ~bit;
    }

    /**
     * A stream capture is about to begin ({@code began}; returns once every allocator has counted it,
     * {@link StreamCaptures#beginning}) or ended. Under this object's lock, so that an allocator made
     * meanwhile counts it exactly once: here, or as it is made.
     */
    synchronized void captureChanged(boolean began) {
        if (began) capturesUnderway++;
        else if (capturesUnderway > 0) capturesUnderway--;
        for (ManagedMemoryResource resource : existing()) {
            StreamCaptures captures = resource.streamCaptures();
            if (captures == null) continue;
            if (began) captures.beginning();
            else captures.ended();
        }
    }

    /**
     * Allocations outside every region carry {@code tag} from now on (null: none), on every
     * allocator, those made later included ({@link MemoryTagControl#setDefaultTag}).
     *
     * @throws IllegalArgumentException when the name is empty or too long (nothing changes)
     */
    synchronized void setDefaultTag(String tag, boolean keepContents) {
        if (tag != null) MemoryTagControl.checkTagName(tag);
        defaultTag = tag;
        defaultTagKeeps = keepContents;
        for (ManagedMemoryResource resource : existing()) {
            MemoryTagControl tags = resource.tagControl();
            if (tags != null) tags.setDefaultTag(tag, keepContents);
        }
    }

    private void applyRememberedPeers(int device, ManagedMemoryResource resource) {
        PeerAccess access = resource.peerAccess();
        for (long rest = peersOf[device]; rest != 0 && access != null; rest &= rest - 1) {
            access.grant(Long.numberOfTrailingZeros(rest));
        }
    }

    /** The allocators made so far, in device order. */
    List<ManagedMemoryResource> existing() {
        List<ManagedMemoryResource> all = new ArrayList<>();
        for (int device = 0, end = devicesOpened; device < end; device++) {
            ManagedMemoryResource resource = byDevice.get(device);
            if (resource != null) all.add(resource);
        }
        return all;
    }

    /** Figures of every device that has an allocator, in device order. */
    List<StatsWriter.DeviceFigures> stats() {
        List<StatsWriter.DeviceFigures> all = new ArrayList<>();
        for (int device = 0; device < MAX_DEVICES; device++) {
            ManagedMemoryResource resource = byDevice.get(device);
            if (resource == null) continue;
            PeerAccess access = resource.peerAccess();
            all.add(new StatsWriter.DeviceFigures(device, resource.stats(), access == null ? 0 : access.peers()));
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
