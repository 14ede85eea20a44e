package dev.vmmkit.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

import picocli.CommandLine.TypeConversionException;

class ByteSizeConverterTest {

    @Test
    void readsPlainNumbersAndBinaryUnits() {
        assertEquals(2097152, ByteSizeConverter.parse("2097152"));
        assertEquals(2L << 20, ByteSizeConverter.parse("2MiB"));
        assertEquals(64L << 20, ByteSizeConverter.parse("64m"));
        assertEquals(1L << 30, ByteSizeConverter.parse("1 GiB".replace(" ", "")));
        assertEquals(512, ByteSizeConverter.parse("512b"));
    }

    @Test
    void refusesNonsense() {
        assertThrows(TypeConversionException.class, () -> ByteSizeConverter.parse("MiB"));
        assertThrows(TypeConversionException.class, () -> ByteSizeConverter.parse("2XB"));
        assertThrows(TypeConversionException.class, () -> ByteSizeConverter.parse("99999999999T"));
    }

    @Test
    void formatsForPeople() {
        assertEquals("2 MiB", ByteSizeConverter.format(2L << 20));
        assertEquals("1.5 GiB", ByteSizeConverter.format(3L << 29));
        assertEquals("512 B", ByteSizeConverter.format(512));
    }
}
