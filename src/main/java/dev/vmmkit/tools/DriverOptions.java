package dev.vmmkit.tools;

import dev.vmmkit.driver.DriverKind;
import dev.vmmkit.driver.Drivers;
import dev.vmmkit.driver.VmmDriver;
import picocli.CommandLine.Option;

import java.util.Locale;

/**
 * The {@code --driver} and {@code --device} options of every command that opens a device, used as a
 * picocli {@code @Mixin}, and the driver they name, opened through {@link Drivers#open(DriverKind, int, long)}.
 * The kind is parsed when the driver is opened, so an unknown name is the command's own clear error.
 */
public final class DriverOptions {
    @Option(names = "--driver", paramLabel = "cuda|host|auto",
            description = "Driver: cuda, host (emulation) or auto (cuda when present). Default: ${DEFAULT-VALUE}.")
    private String kind;

    @Option(names = "--device", defaultValue = "0", paramLabel = "N", description = "Device ordinal. Default: ${DEFAULT-VALUE}.")
    private int device;

    /** Options defaulting to {@code --driver auto}. */
    public DriverOptions() {
        this(DriverKind.AUTO);
    }

    /** Options defaulting to {@code --driver defaultKind} (picocli keeps a mixin field's own instance). */
    public DriverOptions(DriverKind defaultKind) {
        kind = defaultKind.name().toLowerCase(Locale.ROOT);
    }

    /** The {@code --driver} value as given, for messages. */
    public String kindName() {
        return kind;
    }

    /** @throws IllegalArgumentException when {@code --driver} names no driver */
    public DriverKind kind() {
        return DriverKind.parse(kind);
    }

    public int device() {
        return device;
    }

    /** Opens the driver with all the device's memory. */
    public VmmDriver open() {
        return open(Drivers.WHOLE_DEVICE);
    }

    /** Opens the driver with {@code deviceMemoryBytes} for vmmkit ({@link Drivers#open(DriverKind, int, long)}). */
    public VmmDriver open(long deviceMemoryBytes) {
        return Drivers.open(kind(), device, deviceMemoryBytes);
    }
}
