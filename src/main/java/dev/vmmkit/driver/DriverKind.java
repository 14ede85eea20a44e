package dev.vmmkit.driver;

import java.util.Locale;

/** Which driver to open: {@code --driver} of the commands, {@code VMM_DRIVER} of {@code vmmkit run}. */
public enum DriverKind {
    /** The host emulation: device memory is host memory, the GPU is not touched. */
    HOST,
    /** CUDA's virtual memory API on a real device. */
    CUDA,
    /** CUDA when a device is present, otherwise the host emulation. */
    AUTO;

    /**
     * The kind {@code name} names, in any case.
     *
     * @throws IllegalArgumentException for an unknown name
     */
    public static DriverKind parse(String name) {
        try {
            return valueOf(name.trim().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("unknown driver '" + name + "' (expected cuda, host or auto)");
        }
    }
}
