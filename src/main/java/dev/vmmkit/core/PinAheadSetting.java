package dev.vmmkit.core;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;

/**
 * {@code VMM_PIN_AHEAD}: how much pinned host memory may be prepared, while tags that keep their
 * contents are allocated, for their first pause ({@link PinAhead}).
 * <ul>
 * <li>{@code auto} (unset): up to half of the host's physical memory (for each device's allocator);</li>
 * <li>{@code off} or {@code 0}: nothing is pinned ahead (the first pause pins its own memory);</li>
 * <li>a size ({@code 16G}): at most that much pinned host memory held for tags.</li>
 * </ul>
 */
public final class PinAheadSetting {
    public static final String KEY = "VMM_PIN_AHEAD";
    private static final String RULE = "must be auto, off or a size (examples: 0, 16G, 512M): the pinned host memory "
            + "vmmkit may prepare ahead for the first pause of tags that keep their contents";

    private PinAheadSetting() {
    }

    /** The limit in bytes {@code env} asks for; throws IllegalArgumentException naming the key when malformed. */
    public static long limitBytes(Map<String, String> env) {
        String value = env.get(KEY);
        if (value == null || value.isBlank() || value.trim().equalsIgnoreCase("auto")) return halfOfHostMemory();
        if (value.trim().equalsIgnoreCase("off")) return 0;
        try {
            long bytes = ByteSize.parse(value.trim());
            if (bytes < 0) throw new IllegalArgumentException("negative");
            return bytes;
        } catch (RuntimeException e) {
            throw new IllegalArgumentException(KEY + "=" + value + ": " + RULE, e);
        }
    }

    /** The problem with {@code VMM_PIN_AHEAD} in {@code env}, one line, or null. */
    public static String problem(Map<String, String> env) {
        try {
            limitBytes(env);
            return null;
        } catch (IllegalArgumentException e) {
            return e.getMessage();
        }
    }

    /**
     * Half of MemTotal, read once: the settings' check at start-up reads it, so a device's allocator,
     * opened inside the program's first allocation, does not (the read took 0.6-0.8 ms there on an H200).
     */
    static long halfOfHostMemory() {
        long half = halfOfHostMemoryRead;
        if (half < 0) halfOfHostMemoryRead = half = readHalfOfHostMemory();
        return half;
    }

    /** Negative until read. */
    private static volatile long halfOfHostMemoryRead = -1;

    /** Half of MemTotal in /proc/meminfo; 0 (off) where it cannot be read. */
    private static long readHalfOfHostMemory() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/meminfo"))) {
                if (!line.startsWith("MemTotal:")) continue;
                String[] f = line.trim().split("\\s+");
                return Long.parseLong(f[1]) * 1024 / 2; // kB
            }
        } catch (IOException | RuntimeException e) {
            // no /proc: pinning ahead stays off
        }
        return 0;
    }
}
