package dev.vmmkit.driver;

/**
 * A set of device ordinals packed in a {@code long} (bit {@code d} = device {@code d}), so that
 * access calls name several devices without allocating. Ordinals 0..63, as many as
 * {@link #MAX_DEVICES}.
 */
public final class DeviceSet {
    public static final int MAX_DEVICES = 64;
    public static final long NONE = 0L;

    private DeviceSet() {
    }

    /** The set holding {@code device} alone. */
    public static long of(int device) {
        if (device < 0 || device >= MAX_DEVICES) {
            throw new IllegalArgumentException("device ordinal " + device + " is not in 0.." + (MAX_DEVICES - 1));
        }
        return 1L << device;
    }

    public static boolean contains(long set, int device) {
        return device >= 0 && device < MAX_DEVICES && (set & (1L << device)) != 0;
    }

    /** "{0, 3}": for messages. */
    public static String toString(long set) {
        StringBuilder text = new StringBuilder("{");
        for (long rest = set; rest != 0; rest &= rest - 1) {
            if (text.length() > 1) text.append(", ");
            text.append(Long.numberOfTrailingZeros(rest));
        }
        return text.append('}').toString();
    }
}
