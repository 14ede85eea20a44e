package dev.vmmkit.driver;

/**
 * Reads and writes bytes at device addresses, so that conformance checks can prove a mapping
 * really holds data. The driver interface has no such call on purpose: only tests need it.
 *
 * <p>Addresses must lie in mapped ranges that were given access; sizes and addresses of ranges are
 * multiples of 8. Patterns are defined by {@link #patternWord}, the same for every implementation,
 * and depend on the offset inside the range, so a range filled through one address verifies
 * through another address mapping the same memory.
 */
public interface DeviceBytes {

    /** Writes one 64-bit word at {@code address}. */
    void writeLong(long address, long value);

    /** Reads one 64-bit word at {@code address}. */
    long readLong(long address);

    /** Fills {@code [address, address + size)} with the pattern of {@code seed}. */
    void fill(long address, long size, long seed);

    /** The offset of the first word of the range that differs from the pattern of {@code seed}, or -1. */
    long firstMismatch(long address, long size, long seed);

    /** The word at byte {@code offset} of a range filled with the pattern of {@code seed}. */
    static long patternWord(long seed, long offset) {
        // splitmix64 finaliser: neighbouring offsets and seeds give unrelated words.
        long z = seed * 0x9E3779B97F4A7C15L + offset;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    /**
     * The byte access that fits {@code driver}: the driver supplies it when it (or the driver an
     * adaptor wraps) is a {@link DeviceBytesProvider}, as the host and CUDA drivers are.
     *
     * @throws IllegalArgumentException when the driver offers no byte access
     */
    static DeviceBytes forDriver(VmmDriver driver) {
        VmmDriver innermost = DriverAdaptor.innermost(driver);
        if (innermost instanceof DeviceBytesProvider provider) {
            return provider.deviceBytes();
        }
        throw new IllegalArgumentException("driver '" + driver.name() + "' offers no way to read device bytes");
    }
}
