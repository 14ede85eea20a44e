package dev.vmmkit.core;

import dev.vmmkit.driver.ForwardingDriver;
import dev.vmmkit.driver.StreamEvents;
import dev.vmmkit.driver.VmmDriver;

/** Forwards every call; device synchronisations first pass a {@link DeviceSyncGate}. */
final class DeviceSyncGatedDriver extends ForwardingDriver {
    private final DeviceSyncGate gate;
    private final StreamEvents events = new GatedEvents();

    DeviceSyncGatedDriver(VmmDriver delegate, DeviceSyncGate gate) {
        super(delegate);
        this.gate = gate;
    }

    @Override
    public StreamEvents events() {
        return events;
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
