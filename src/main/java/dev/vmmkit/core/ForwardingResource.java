package dev.vmmkit.core;

/**
 * The base of a resource adaptor: forwards each call to the resource it wraps, so an adaptor
 * overrides only the calls whose behaviour it changes (as {@code driver.ForwardingDriver} does for
 * drivers).
 */
public abstract class ForwardingResource implements ManagedMemoryResource {
    protected final ManagedMemoryResource resource;

    protected ForwardingResource(ManagedMemoryResource resource) {
        this.resource = resource;
    }

    @Override
    public long allocate(long size, long stream) {
        return resource.allocate(size, stream);
    }

    @Override
    public void deallocate(long address, long stream) {
        resource.deallocate(address, stream);
    }

    @Override
    public long reallocate(long address, long newSize, long stream) {
        return resource.reallocate(address, newSize, stream);
    }

    @Override
    public boolean remapCopy(long dst, long src, long count, long stream) {
        return resource.remapCopy(dst, src, count, stream);
    }

    @Override
    public boolean owns(long address) {
        return resource.owns(address);
    }

    @Override
    public long sizeOf(long address) {
        return resource.sizeOf(address);
    }

    @Override
    public long liveAllocationHolding(long address) {
        return resource.liveAllocationHolding(address);
    }

    @Override
    public PeerAccess peerAccess() {
        return resource.peerAccess();
    }

    @Override
    public SharedPages sharedPages() {
        return resource.sharedPages();
    }

    @Override
    public MemoryTagControl tagControl() {
        return resource.tagControl();
    }

    @Override
    public StreamCaptures streamCaptures() {
        return resource.streamCaptures();
    }

    @Override
    public DeviceWideFreeClock deviceWideFreeClock() {
        return resource.deviceWideFreeClock();
    }

    @Override
    public long reservedBytes() {
        return resource.reservedBytes();
    }

    @Override
    public AllocatorStats stats() {
        return resource.stats();
    }

    @Override
    public void close() {
        resource.close();
    }
}
