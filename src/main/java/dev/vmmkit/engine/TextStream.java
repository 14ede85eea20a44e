package dev.vmmkit.engine;

import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * Joins the engine's UTF-8 pieces into text and enforces stop strings. A piece may end inside a
 * character, and a stop string may span pieces, so text that could still be either is held back
 * until the next piece decides it; {@link #add} returns only text that is final.
 */
final class TextStream {
    private final CharsetDecoder decoder = StandardCharsets.UTF_8.newDecoder()
            .onMalformedInput(CodingErrorAction.REPLACE).onUnmappableCharacter(CodingErrorAction.REPLACE);
    private final List<String> stops;
    private final int longestStop;
    private ByteBuffer pending = ByteBuffer.allocate(0);
    /** Decoded text not handed out yet (it may begin a stop string). */
    private final StringBuilder held = new StringBuilder();
    private final StringBuilder all = new StringBuilder();
    private boolean stopped;

    TextStream(List<String> stops) {
        this.stops = stops;
        this.longestStop = stops.stream().mapToInt(String::length).max().orElse(0);
    }

    /** Adds one piece; returns the text that became final ("" when none). */
    String add(byte[] piece) {
        if (stopped) return "";
        ByteBuffer in = ByteBuffer.allocate(pending.remaining() + piece.length);
        in.put(pending).put(piece).flip();
        CharBuffer out = CharBuffer.allocate(in.remaining() + 1);
        decoder.decode(in, out, false);
        pending = in.slice();
        held.append(out.flip());
        return release(false);
    }

    /** The end of the generation: whatever is still held back (a lone partial character becomes U+FFFD). */
    String finish() {
        if (stopped) return "";
        if (pending.hasRemaining()) {
            CharBuffer out = CharBuffer.allocate(pending.remaining() + 1);
            decoder.decode(pending, out, true);
            decoder.flush(out);
            held.append(out.flip());
            pending = ByteBuffer.allocate(0);
        }
        return release(true);
    }

    /** True once a stop string was seen; the text before it was all handed out, the stop string is not. */
    boolean stopped() {
        return stopped;
    }

    /** All text handed out so far. */
    String text() {
        return all.toString();
    }

    private String release(boolean end) {
        int cut = -1;
        for (String stop : stops) {
            int at = held.indexOf(stop);
            if (at >= 0 && (cut < 0 || at < cut)) cut = at;
        }
        String out;
        if (cut >= 0) {
            stopped = true;
            out = held.substring(0, cut);
            held.setLength(0);
        } else {
            int keep = end ? 0 : Math.min(held.length(), Math.max(0, longestStop - 1));
            // hold back only a tail that could begin a stop string
            while (keep > 0 && !beginsAStop(held.substring(held.length() - keep))) keep--;
            int upTo = held.length() - keep;
            if (upTo > 0 && Character.isHighSurrogate(held.charAt(upTo - 1)) && !end) upTo--;
            out = held.substring(0, upTo);
            held.delete(0, upTo);
        }
        all.append(out);
        return out;
    }

    private boolean beginsAStop(String tail) {
        for (String stop : stops) if (stop.startsWith(tail)) return true;
        return false;
    }
}
