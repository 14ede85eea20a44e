package dev.vmmkit.driver;

/**
 * Forwards each call to the {@link HostTransfers} it wraps, so an adaptor overrides only the calls
 * whose behaviour it changes (as {@link ForwardingDriver} does for the driver's own calls).
 */
public abstract class ForwardingTransfers implements HostTransfers {
    protected final HostTransfers delegate;

    protected ForwardingTransfers(HostTransfers delegate) {
        this.delegate = delegate;
    }

    @Override
    public long allocatePinned(long bytes) {
        return delegate.allocatePinned(bytes);
    }

    @Override
    public void freePinned(long address) {
        delegate.freePinned(address);
    }

    @Override
    public long createStream() {
        return delegate.createStream();
    }

    @Override
    public void destroyStream(long stream) {
        delegate.destroyStream(stream);
    }

    @Override
    public void copyToHost(long host, long va, long bytes, long stream) {
        delegate.copyToHost(host, va, bytes, stream);
    }

    @Override
    public void copyToDevice(long va, long host, long bytes, long stream) {
        delegate.copyToDevice(va, host, bytes, stream);
    }
}
