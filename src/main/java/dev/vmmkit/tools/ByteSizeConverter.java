package dev.vmmkit.tools;

import java.util.Locale;

import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.TypeConversionException;

/**
 * Reads a byte count such as {@code 2097152}, {@code 2MiB}, {@code 2m} or {@code 1GiB}. Every unit
 * is binary (K = 1024), as memory sizes always are here.
 */
public final class ByteSizeConverter implements ITypeConverter<Long> {

    @Override
    public Long convert(String text) {
        return parse(text);
    }

    /** The number of bytes {@code text} names. */
    public static long parse(String text) {
        String s = text.trim().toLowerCase(Locale.ROOT).replace("_", "");
        int unitStart = 0;
        while (unitStart < s.length() && Character.isDigit(s.charAt(unitStart))) {
            unitStart++;
        }
        if (unitStart == 0) {
            throw new TypeConversionException("'" + text + "' is not a size (examples: 2097152, 2MiB, 64m, 1GiB)");
        }
        long number = Long.parseLong(s.substring(0, unitStart));
        int shift = switch (s.substring(unitStart)) {
            case "", "b" -> 0;
            case "k", "kb", "kib" -> 10;
            case "m", "mb", "mib" -> 20;
            case "g", "gb", "gib" -> 30;
            case "t", "tb", "tib" -> 40;
            default -> throw new TypeConversionException("unknown unit in '" + text + "' (use B, KiB, MiB, GiB, TiB)");
        };
        if (number > (Long.MAX_VALUE >> shift)) {
            throw new TypeConversionException("'" + text + "' is too large");
        }
        return number << shift;
    }

    /** A byte count for people: {@code 2 MiB}, {@code 1.5 GiB}, {@code 512 B}. */
    public static String format(long bytes) {
        String[] units = {"B", "KiB", "MiB", "GiB", "TiB"};
        double value = bytes;
        int unit = 0;
        while (value >= 1024 && unit < units.length - 1) {
            value /= 1024;
            unit++;
        }
        return value == Math.rint(value)
                ? String.format(Locale.ROOT, "%d %s", (long) value, units[unit])
                : String.format(Locale.ROOT, "%.1f %s", value, units[unit]);
    }
}
