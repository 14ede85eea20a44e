package dev.vmmkit.driver.host;

import java.util.concurrent.CopyOnWriteArrayList;

/**
 * The host drivers open in this process: the emulated machine. Its devices share one address
 * space, so a range mapped by one driver may have been granted to another driver's device; this
 * registry answers "may device d touch this range" across all of them. Opening and closing drivers
 * is rare, so a copy-on-write list is enough.
 */
final class HostDevices {
    private static final CopyOnWriteArrayList<HostDriver> OPEN = new CopyOnWriteArrayList<>();

    private HostDevices() {
    }

    static void register(HostDriver driver) {
        OPEN.add(driver);
    }

    static void unregister(HostDriver driver) {
        OPEN.remove(driver);
    }

    /** True when one open host driver maps all of {@code [va, va + size)} with access for {@code device}. */
    static boolean isAccessibleTo(int device, long va, long size) {
        for (HostDriver driver : OPEN) {
            if (driver.isAccessibleTo(device, va, size)) {
                return true;
            }
        }
        return false;
    }
}
