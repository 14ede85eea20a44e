package dev.vmmkit.core;

import dev.vmmkit.driver.ForwardingDriver;
import dev.vmmkit.driver.ForwardingEvents;
import dev.vmmkit.driver.StreamEvents;
import dev.vmmkit.driver.VmmDriver;

/** Forwards every call; device synchronisations first pass a {@link DeviceSyncGate}. */
final class DeviceSyncGatedDriver extends ForwardingDriver {
    private final StreamEvents events;

    DeviceSyncGatedDriver(VmmDriver delegate, DeviceSyncGate gate) {
        super(delegate);
        this.events = new ForwardingEvents(delegate.events()) {
            @Override
            public void synchronizeDevice() {
                gate.pass();
                super.synchronizeDevice();
            }
        };
    }

    @Override
    public StreamEvents events() {
        return events;
    }
}
