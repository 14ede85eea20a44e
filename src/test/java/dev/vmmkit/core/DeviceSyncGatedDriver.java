package dev.vmmkit.core;

import dev.vmmkit.driver.DriverAdaptor;
import dev.vmmkit.driver.StreamEvents;
import dev.vmmkit.driver.VmmDriver;

/** Forwards every call; device synchronisations first pass a {@link DeviceSyncGate}. */
final class DeviceSyncGatedDriver implements DriverAdaptor {
    private final VmmDriver delegate;
    private final DeviceSyncGate gate;
    private final StreamEvents events = new GatedEvents();

    DeviceSyncGatedDriver(VmmDriver delegate, DeviceSyncGate gate) {
        this.delegate = delegate;
        this.gate = gate;
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
    public long create(long size) {
        return delegate.create(size);
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
    public void unmap(long va, long size) {
        delegate.unmap(va, size);
    }

    @Override
    public MemoryInfo memoryInfo() {
        return delegate.memoryInfo();
    }

    @Override
    public StreamEvents events() {
        return events;
    }

    @Override
    public void close() {
        delegate.close();
    }

    private final class GatedEvents implements StreamEvents {
        @Override
        public long create() {
            return delegate.events().create();
        }

        @Override
        public void record(long event, long stream) {
            delegate.events().record(event, stream);
        }

        @Override
        public boolean isComplete(long event) {
            return delegate.events().isComplete(event);
        }

        @Override
        public void synchronize(long event) {
            delegate.events().synchronize(event);
        }

        @Override
        public void destroy(long event) {
            delegate.events().destroy(event);
        }

        @Override
        public void synchronizeDevice() {
            gate.pass();
            delegate.events().synchronizeDevice();
        }
    }
}
