package dev.vmmkit.driver;

/**
 * A driver that adds one behaviour (counting, logging, fault injection) around another driver and
 * forwards everything else to it.
 */
public interface DriverAdaptor extends VmmDriver {

    /** The driver this adaptor forwards to. */
    VmmDriver delegate();

    /** The driver at the bottom of a stack of adaptors (the driver itself if it is none). */
    static VmmDriver innermost(VmmDriver driver) {
        VmmDriver current = driver;
        while (current instanceof DriverAdaptor adaptor) {
            current = adaptor.delegate();
        }
        return current;
    }
}
