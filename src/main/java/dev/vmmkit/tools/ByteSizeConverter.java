package dev.vmmkit.tools;

import dev.vmmkit.core.ByteSize;
import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.TypeConversionException;

/** Reads a byte-size option ({@code 2097152}, {@code 2MiB}, {@code 80G}) with {@link ByteSize}'s grammar. */
public final class ByteSizeConverter implements ITypeConverter<Long> {

    @Override
    public Long convert(String text) {
        return parse(text);
    }

    /** The number of bytes {@code text} names; a bad size is picocli's usage error. */
    public static long parse(String text) {
        try {
            return ByteSize.parse(text);
        } catch (IllegalArgumentException e) {
            throw new TypeConversionException(e.getMessage());
        }
    }

    /** A byte count for people: {@code 2 MiB}, {@code 1.5 GiB}, {@code 512 B}. */
    public static String format(long bytes) {
        return ByteSize.format(bytes);
    }
}
