package dev.vmmkit.interpose;

import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.DriverKind;
import dev.vmmkit.driver.Drivers;
import dev.vmmkit.driver.VmmDriver;

/**
 * Whether the real allocator (VmmManager over the host driver) is in this build. Tests that need it
 * are skipped until it lands; they run by themselves once it does, with nothing to flip.
 */
final class RealAllocator {
    private static final boolean PRESENT = probe();

    private RealAllocator() {
    }

    static boolean present() {
        return PRESENT;
    }

    private static boolean probe() {
        try (VmmDriver driver = Drivers.open(DriverKind.HOST, 0, 64L << 20);
             VmmManager manager = new VmmManager(driver, VmmConfig.DEFAULTS)) {
            manager.deallocate(manager.allocate(512, 0), 0);
            return true;
        } catch (UnsupportedOperationException notYet) {
            return false;
        }
    }
}
