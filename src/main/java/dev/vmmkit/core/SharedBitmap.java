package dev.vmmkit.core;

import java.util.BitSet;

/**
 * A {@link BitSet} of a fixed number of bits that several threads may set, clear and read at once:
 * each call holds the bitmap's monitor. A bare {@code BitSet} does a plain read-modify-write of a
 * 64-bit word (and recounts the words in use on a clear), which loses a concurrent writer's bits;
 * the page table's writers map and unmap disjoint page ranges without a common lock, 64 pages to a
 * word.
 *
 * <p>A monitor rather than atomic word operations: the calls come from slow paths, pauses and
 * close, never from a cache hit, and a first large mapping may run before the JIT has compiled
 * anything, where a monitor is cheap and a {@code VarHandle} call is not. Allocates nothing after
 * construction (the words are sized for every bit up front).
 */
final class SharedBitmap {
    private final BitSet bitSet;
    private final int bits;

    SharedBitmap(int bits) {
        if (bits < 0) throw new IllegalArgumentException("bits < 0: " + bits);
        this.bits = bits;
        this.bitSet = new BitSet(bits);
    }

    /** Sets bits {@code [from, to)}. */
    synchronized void set(int from, int to) {
        check(from, to);
        bitSet.set(from, to);
    }

    /** Clears bits {@code [from, to)}. */
    synchronized void clear(int from, int to) {
        check(from, to);
        bitSet.clear(from, to);
    }

    /** Whether bit {@code i} is set. */
    synchronized boolean get(int i) {
        check(i, i + 1);
        return bitSet.get(i);
    }

    /** The first set bit at or after {@code from}, or -1. */
    synchronized int nextSetBit(int from) {
        if (from < 0) throw new IndexOutOfBoundsException("from < 0: " + from);
        return bitSet.nextSetBit(from);
    }

    /** The first clear bit at or after {@code from}; the number of bits when every bit from there on is set. */
    synchronized int nextClearBit(int from) {
        if (from < 0) throw new IndexOutOfBoundsException("from < 0: " + from);
        return Math.min(bits, bitSet.nextClearBit(from));
    }

    private void check(int from, int to) {
        if (from < 0 || to > bits || from > to) {
            throw new IndexOutOfBoundsException("bits [" + from + ", " + to + ") of " + bits);
        }
    }
}
