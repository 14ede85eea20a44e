package dev.vmmkit.tools;

import dev.vmmkit.driver.Drivers;
import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.Option;
import picocli.CommandLine.TypeConversionException;

/**
 * The {@code --device-memory SIZE} option of {@code replay}, {@code run} and {@code serve}, used as a
 * picocli {@code @Mixin}: how much device memory vmmkit may use (the host emulation's size; a cap on
 * a GPU; see {@link Drivers#open(dev.vmmkit.driver.DriverKind, int, long)}). The preloaded library
 * reads the same setting from {@link #ENVIRONMENT}.
 */
public final class DeviceMemoryOption {
    /** The environment variable the preloaded library reads (set by {@code vmmkit run --device-memory}). */
    public static final String ENVIRONMENT = "VMM_DEVICE_MEMORY";

    @Option(names = "--device-memory", paramLabel = "SIZE", converter = PositiveSize.class,
            description = "Device memory vmmkit may use, e.g. 8G: the size of the host emulation's device; on a GPU, "
                    + "a cap on the physical memory vmmkit holds (past it the device counts as full). "
                    + "Default: all the device has (80G for the emulation). Environment: " + ENVIRONMENT + ".")
    private Long bytes;

    /** The size given, or {@link Drivers#WHOLE_DEVICE} when the option was not. */
    public long bytes() {
        return bytes == null ? Drivers.WHOLE_DEVICE : bytes;
    }

    /** Whether the option was given. */
    public boolean given() {
        return bytes != null;
    }

    /** A byte size above 0, read with the one size grammar ({@link ByteSizeConverter}). */
    static final class PositiveSize implements ITypeConverter<Long> {
        @Override
        public Long convert(String text) {
            long value = ByteSizeConverter.parse(text);
            if (value <= 0) throw new TypeConversionException("'" + text + "' is not a size above 0 (examples: 512M, 8G)");
            return value;
        }
    }
}
