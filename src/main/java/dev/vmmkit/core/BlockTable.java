package dev.vmmkit.core;

import java.util.Arrays;

/**
 * Every block of one region, in primitive arrays indexed by block id (Agrona style: no object per
 * block, nothing allocated per operation once the arrays have grown).
 *
 * <p>Blocks tile the region without gaps; {@link #prev}/{@link #next} link address neighbours, which
 * is all coalescing needs. A block is {@link #LIVE} (handed out), {@link #FREE} (mapped, cached for
 * reuse), {@link #UNMAPPED} (plain reserved address space, no physical memory behind it) or
 * {@link #IN_FLIGHT} (being mapped or unmapped by a thread that does not hold the lock; coalescing
 * leaves it alone).
 */
final class BlockTable {
    static final byte LIVE = 1;
    static final byte FREE = 2;
    static final byte UNMAPPED = 3;
    /** Taken out of every tree by a thread that is calling the driver for it without the lock. */
    static final byte IN_FLIGHT = 4;
    static final int NONE = -1;

    long[] address;
    long[] size;
    /** LIVE: the size the user asked for. FREE: the stream tag it was freed on. */
    long[] requestedOrStream;
    /** FREE: sequence number of the free, so a stream event recorded later covers it. */
    long[] freeSequence;
    int[] prev;
    int[] next;
    byte[] kind;

    private int[] recycled;
    private int recycledCount;
    private int used;

    BlockTable(int initialCapacity) {
        int n = Math.max(16, initialCapacity);
        address = new long[n];
        size = new long[n];
        requestedOrStream = new long[n];
        freeSequence = new long[n];
        prev = new int[n];
        next = new int[n];
        kind = new byte[n];
        recycled = new int[n];
    }

    /** A fresh block id with no neighbours. Grows the arrays when full (rare, amortised). */
    int newBlock(byte kindOfBlock, long addr, long bytes) {
        int id;
        if (recycledCount > 0) {
            id = recycled[--recycledCount];
        } else {
            if (used == address.length) grow();
            id = used++;
        }
        kind[id] = kindOfBlock;
        address[id] = addr;
        size[id] = bytes;
        prev[id] = NONE;
        next[id] = NONE;
        requestedOrStream[id] = 0;
        freeSequence[id] = 0;
        return id;
    }

    void recycle(int id) {
        kind[id] = 0;
        recycled[recycledCount++] = id;
    }

    long end(int id) {
        return address[id] + size[id];
    }

    /** Inserts {@code id} right after {@code at} in address order. */
    void linkAfter(int at, int id) {
        int after = next[at];
        prev[id] = at;
        next[id] = after;
        next[at] = id;
        if (after != NONE) prev[after] = id;
    }

    /** Removes {@code id} from the address chain (its range must have been given to a neighbour). */
    void unlink(int id) {
        int p = prev[id];
        int n = next[id];
        if (p != NONE) next[p] = n;
        if (n != NONE) prev[n] = p;
    }

    private void grow() {
        int n = address.length * 2;
        address = Arrays.copyOf(address, n);
        size = Arrays.copyOf(size, n);
        requestedOrStream = Arrays.copyOf(requestedOrStream, n);
        freeSequence = Arrays.copyOf(freeSequence, n);
        prev = Arrays.copyOf(prev, n);
        next = Arrays.copyOf(next, n);
        kind = Arrays.copyOf(kind, n);
        recycled = Arrays.copyOf(recycled, n);
    }
}
