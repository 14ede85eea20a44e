package dev.vmmkit.engine;

import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * {@link TextStream} against a reference worked on the whole text at once: for random texts with
 * multi-byte characters cut into random byte pieces, and random stop strings, the concatenated
 * output is the text up to the first stop string (or all of it), whatever the cuts.
 */
class TextStreamTest {
    private static final String[] ALPHABET = {"a", "b", "o", " ", "w", "\u00e9", "\u4e2d", "\uD83D\uDE00", "\n"};

    @Test
    void piecesCutAnywhereGiveTheTextUpToTheFirstStopString() {
        Random random = new Random(42);
        for (int round = 0; round < 3000; round++) {
            StringBuilder text = new StringBuilder();
            for (int i = random.nextInt(40); i > 0; i--) text.append(ALPHABET[random.nextInt(ALPHABET.length)]);
            List<String> stops = random.nextBoolean() ? List.of()
                    : List.of(word(random), word(random));
            String whole = text.toString();
            int cut = -1;
            for (String stop : stops) {
                int at = whole.indexOf(stop);
                if (at >= 0 && (cut < 0 || at < cut)) cut = at;
            }
            String expected = cut < 0 ? whole : whole.substring(0, cut);

            TextStream stream = new TextStream(stops);
            StringBuilder out = new StringBuilder();
            byte[] bytes = whole.getBytes(StandardCharsets.UTF_8);
            for (int at = 0; at < bytes.length; ) {
                int length = Math.min(bytes.length - at, 1 + random.nextInt(4));
                byte[] piece = java.util.Arrays.copyOfRange(bytes, at, at + length);
                out.append(stream.add(piece));
                at += length;
            }
            out.append(stream.finish());
            assertEquals(expected, out.toString(), "text " + whole + ", stops " + stops);
            assertEquals(expected, stream.text());
            assertEquals(cut >= 0, stream.stopped(), "text " + whole + ", stops " + stops);
        }
    }

    @Test
    void aLonePartialCharacterAtTheEndBecomesTheReplacementCharacter() {
        TextStream stream = new TextStream(List.of());
        assertEquals("a", stream.add(new byte[]{'a', (byte) 0xC3}));
        assertEquals("\uFFFD", stream.finish());
    }

    private static String word(Random random) {
        StringBuilder word = new StringBuilder();
        for (int i = 1 + random.nextInt(3); i > 0; i--) word.append(ALPHABET[random.nextInt(ALPHABET.length)]);
        return word.toString();
    }
}
