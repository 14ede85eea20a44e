package dev.vmmkit.core;

/**
 * A fixed number of bits, 64 to a word, that several threads may set, clear and read at once: each
 * call holds the bitmap's monitor, so writers of different bits of one word never undo each other.
 * {@link java.util.BitSet} does a plain read-modify-write of the word (and recounts the words in
 * use on a clear), which loses a concurrent writer's bits; the page table's writers map and unmap
 * disjoint page ranges without a common lock, 64 pages to a word.
 *
 * <p>A monitor rather than atomic word operations: the calls come from slow paths, pauses and
 * close, never from a cache hit, and a first large mapping may run before the JIT has compiled
 * anything, where a monitor is cheap and a {@code VarHandle} call is not. Allocates nothing after
 * construction.
 */
final class SharedBitmap {
    private final long[] words;
    private final int bits;

    SharedBitmap(int bits) {
        if (bits < 0) throw new IllegalArgumentException("bits < 0: " + bits);
        this.bits = bits;
        this.words = new long[(bits + 63) >>> 6];
    }

    /** Sets bits {@code [from, to)}. */
    synchronized void set(int from, int to) {
        check(from, to);
        for (int w = from >>> 6; from < to; w++) {
            int end = Math.min(to, (w + 1) << 6);
            words[w] |= mask(from, end);
            from = end;
        }
    }

    /** Clears bits {@code [from, to)}. */
    synchronized void clear(int from, int to) {
        check(from, to);
        for (int w = from >>> 6; from < to; w++) {
            int end = Math.min(to, (w + 1) << 6);
            words[w] &= ~mask(from, end);
            from = end;
        }
    }

    /** Whether bit {@code i} is set. */
    synchronized boolean get(int i) {
        check(i, i + 1);
        return (words[i >>> 6] & (1L << i)) != 0;
    }

    /** The first set bit at or after {@code from}, or -1. */
    synchronized int nextSetBit(int from) {
        if (from < 0) throw new IndexOutOfBoundsException("from < 0: " + from);
        if (from >= bits) return -1;
        int w = from >>> 6;
        long word = words[w] & (-1L << from);
        while (word == 0) {
            if (++w == words.length) return -1;
            word = words[w];
        }
        return (w << 6) + Long.numberOfTrailingZeros(word);
    }

    /** The first clear bit at or after {@code from}; {@link #size()} when every bit from there on is set. */
    synchronized int nextClearBit(int from) {
        if (from < 0) throw new IndexOutOfBoundsException("from < 0: " + from);
        if (from >= bits) return bits;
        int w = from >>> 6;
        long word = ~words[w] & (-1L << from);
        while (word == 0) {
            if (++w == words.length) return bits;
            word = ~words[w];
        }
        return Math.min(bits, (w << 6) + Long.numberOfTrailingZeros(word));
    }

    /** The number of bits. */
    int size() {
        return bits;
    }

    /** The bits {@code [from, to)} of one word ({@code to} at most that word's end). */
    private static long mask(int from, int to) {
        long below = to - (from & ~63) == 64 ? -1L : (1L << (to & 63)) - 1;
        return below & (-1L << from);
    }

    private void check(int from, int to) {
        if (from < 0 || to > bits || from > to) {
            throw new IndexOutOfBoundsException("bits [" + from + ", " + to + ") of " + bits);
        }
    }
}
