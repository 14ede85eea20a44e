package dev.vmmkit.core;

import java.util.Locale;

/**
 * The one byte-size grammar and formatter of vmmkit: environment variables ({@code VMM_CHUNK_SIZE=8M}),
 * command-line options ({@code --device-memory 8G}) and printed figures all go through it.
 *
 * <p>Grammar: digits, then an optional unit, case-insensitive, with optional underscores between digits:
 * none or {@code B}; {@code K}, {@code KB}, {@code KiB}; {@code M}, {@code MB}, {@code MiB};
 * {@code G}...; {@code T}.... Every unit is binary (K = 1024), as memory sizes are.
 */
public final class ByteSize {
    private static final String[] UNITS = {"B", "KiB", "MiB", "GiB", "TiB"};
    /** The grammar in one line, for every message about a bad size. */
    private static final String UNIT_RULE = "a whole number of bytes, or with a unit K, M, G, T or KiB, MiB, GiB, TiB "
            + "(KB, MB... too; all binary, 1K = 1024), e.g. 4096, 512M, 80G";

    private ByteSize() {
    }

    /**
     * The number of bytes {@code text} names.
     *
     * @throws IllegalArgumentException naming the text and what is wrong with it
     */
    public static long parse(String text) {
        if (text == null) throw new IllegalArgumentException("no size given");
        String s = text.trim().toLowerCase(Locale.ROOT).replace("_", "");
        int unitStart = 0;
        while (unitStart < s.length() && Character.isDigit(s.charAt(unitStart))) unitStart++;
        if (unitStart == 0) {
            throw new IllegalArgumentException("'" + text + "' is not a size (" + UNIT_RULE + ")");
        }
        int shift = switch (s.substring(unitStart)) {
            case "", "b" -> 0;
            case "k", "kb", "kib" -> 10;
            case "m", "mb", "mib" -> 20;
            case "g", "gb", "gib" -> 30;
            case "t", "tb", "tib" -> 40;
            default -> throw new IllegalArgumentException("unknown unit in '" + text + "' (" + UNIT_RULE + ")");
        };
        long number;
        try {
            number = Long.parseLong(s.substring(0, unitStart));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("'" + text + "' is too large", e);
        }
        if (number > (Long.MAX_VALUE >> shift)) throw new IllegalArgumentException("'" + text + "' is too large");
        return number << shift;
    }

    /** A byte count for people, whole numbers without decimals: {@code 2 MiB}, {@code 1.5 GiB}, {@code 512 B}. */
    public static String format(long bytes) {
        double value = bytes;
        int unit = 0;
        while (value >= 1024 && unit < UNITS.length - 1) {
            value /= 1024;
            unit++;
        }
        return value == Math.rint(value)
                ? String.format(Locale.ROOT, "%d %s", (long) value, UNITS[unit])
                : String.format(Locale.ROOT, "%.1f %s", value, UNITS[unit]);
    }

    /** In MiB with one decimal whatever the size, for figures compared line by line in a log: {@code 3519.0 MiB}. */
    public static String formatMiB(long bytes) {
        return String.format(Locale.ROOT, "%.1f MiB", bytes / (double) (1L << 20));
    }

    /** As {@link #format}, but always one decimal from KiB up, for columns of figures: {@code 80.0 GiB}. */
    public static String formatOneDecimal(long bytes) {
        if (bytes < 1024) return bytes + " B";
        double value = bytes;
        int unit = 0;
        while (value >= 1024 && unit < UNITS.length - 1) {
            value /= 1024;
            unit++;
        }
        return String.format(Locale.ROOT, "%.1f %s", value, UNITS[unit]);
    }
}
