package dev.vmmkit.core;

import dev.vmmkit.driver.BeforeDeviceSyncDriver;
import dev.vmmkit.driver.VmmDriver;

/** Forwards every call; device synchronisations first pass a {@link DeviceSyncGate}. */
final class DeviceSyncGatedDriver extends BeforeDeviceSyncDriver {

    DeviceSyncGatedDriver(VmmDriver delegate, DeviceSyncGate gate) {
        super(delegate, gate::pass);
    }
}
