package dev.vmmkit.driver;

/**
 * Forwards each event call to the events it wraps, so an adaptor of a driver's {@link StreamEvents}
 * overrides only the calls whose behaviour it changes (as {@link ForwardingDriver} does for the
 * driver's own calls).
 */
public abstract class ForwardingEvents implements StreamEvents {
    protected final StreamEvents delegate;

    protected ForwardingEvents(StreamEvents delegate) {
        this.delegate = delegate;
    }

    @Override
    public long create() {
        return delegate.create();
    }

    @Override
    public void record(long event, long stream) {
        delegate.record(event, stream);
    }

    @Override
    public boolean isComplete(long event) {
        return delegate.isComplete(event);
    }

    @Override
    public void synchronize(long event) {
        delegate.synchronize(event);
    }

    @Override
    public void destroy(long event) {
        delegate.destroy(event);
    }

    @Override
    public void synchronizeDevice() {
        delegate.synchronizeDevice();
    }

    @Override
    public void prepareThread() {
        delegate.prepareThread();
    }
}
