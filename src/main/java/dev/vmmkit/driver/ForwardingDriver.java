package dev.vmmkit.driver;

/**
 * The base of every adaptor: forwards each call to the driver it wraps, so an adaptor overrides
 * only the calls whose behaviour it changes. {@code mapWithAccess} is deliberately not forwarded:
 * the interface's default runs through the adaptor's own map, setAccess and unmap.
 */
public abstract class ForwardingDriver implements DriverAdaptor {
    protected final VmmDriver delegate;

    protected ForwardingDriver(VmmDriver delegate) {
        this.delegate = delegate;
    }

    @Override
    public VmmDriver delegate() {
        return delegate;
    }

    @Override
    public String name() {
        return delegate.name();
    }

    @Override
    public int device() {
        return delegate.device();
    }

    @Override
    public long granularity() {
        return delegate.granularity();
    }

    @Override
    public long reserve(long size, long alignment) {
        return delegate.reserve(size, alignment);
    }

    @Override
    public void addressFree(long va, long size) {
        delegate.addressFree(va, size);
    }

    @Override
    public long create(long size, boolean exportable) {
        return delegate.create(size, exportable);
    }

    @Override
    public void release(long handle) {
        delegate.release(handle);
    }

    @Override
    public void map(long va, long size, long handle) {
        delegate.map(va, size, handle);
    }

    @Override
    public void setAccess(long va, long size) {
        delegate.setAccess(va, size);
    }

    @Override
    public void setAccess(long va, long size, long grant, long revoke) {
        delegate.setAccess(va, size, grant, revoke);
    }

    @Override
    public boolean canExport() {
        return delegate.canExport();
    }

    @Override
    public int exportHandle(long handle) {
        return delegate.exportHandle(handle);
    }

    @Override
    public long importHandle(int fd, long size) {
        return delegate.importHandle(fd, size);
    }

    @Override
    public void unmap(long va, long size) {
        delegate.unmap(va, size);
    }

    @Override
    public MemoryInfo memoryInfo() {
        return delegate.memoryInfo();
    }

    @Override
    public OtherProcesses otherProcesses() {
        return delegate.otherProcesses();
    }

    @Override
    public StreamEvents events() {
        return delegate.events();
    }

    @Override
    public HostTransfers transfers() {
        return delegate.transfers();
    }

    @Override
    public void close() {
        delegate.close();
    }
}
