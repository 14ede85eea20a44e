package dev.vmmkit.trace;

import org.agrona.collections.Long2LongHashMap;

import java.util.Arrays;

/**
 * Collects the requests of one trace into the primitive arrays of an {@link AllocationTrace}, and
 * keeps the figures the trace alone defines (peak live bytes, most live allocations). Both readers
 * ({@link TraceReader}, {@link SnapshotReader}) build through it; they decide what a request that
 * does not pair up means.
 */
final class TraceBuilder {
    /** Size of a key that is not live; real sizes are never negative. */
    static final long NOT_LIVE = -1;

    private int ops;
    private byte[] kinds = new byte[1024];
    private long[] keys = new long[1024];
    private long[] sizes = new long[1024];
    private long[] streams = new long[1024];
    private int[] lineNumbers = new int[1024];
    private int allocs;
    private long liveBytes;
    private long peakLiveBytes;
    private int maxLiveAllocations;
    private final Long2LongHashMap liveSizes = new Long2LongHashMap(NOT_LIVE);

    /** Appends an alloc; false (and nothing appended) when {@code key} is already live. */
    boolean alloc(long key, long size, long stream, int lineNumber) {
        if (liveSizes.get(key) != NOT_LIVE) return false;
        liveSizes.put(key, size);
        liveBytes += size;
        peakLiveBytes = Math.max(peakLiveBytes, liveBytes);
        maxLiveAllocations = Math.max(maxLiveAllocations, liveSizes.size());
        allocs++;
        append(AllocationTrace.ALLOC, key, size, stream, lineNumber);
        return true;
    }

    /** Appends the free of {@code key} and returns its size; {@link #NOT_LIVE} (nothing appended) when it is not live. */
    long free(long key, long stream, int lineNumber) {
        long size = liveSizes.remove(key);
        if (size == NOT_LIVE) return NOT_LIVE;
        liveBytes -= size;
        append(AllocationTrace.FREE, key, size, stream, lineNumber);
        return size;
    }

    long peakLiveBytes() {
        return peakLiveBytes;
    }

    /** Operations appended so far. */
    int ops() {
        return ops;
    }

    AllocationTrace build(String name, RecordedMemory recorded) {
        // Trim the growth slack so a held trace costs only what it holds.
        return new AllocationTrace(name, ops, Arrays.copyOf(kinds, ops), Arrays.copyOf(keys, ops),
                Arrays.copyOf(sizes, ops), Arrays.copyOf(streams, ops), Arrays.copyOf(lineNumbers, ops),
                allocs, maxLiveAllocations, peakLiveBytes, recorded);
    }

    private void append(byte kind, long key, long size, long stream, int lineNumber) {
        if (ops == kinds.length) grow();
        kinds[ops] = kind;
        keys[ops] = key;
        sizes[ops] = size;
        streams[ops] = stream;
        lineNumbers[ops] = lineNumber;
        ops++;
    }

    private void grow() {
        int capacity = Math.multiplyExact(kinds.length, 2);
        kinds = Arrays.copyOf(kinds, capacity);
        keys = Arrays.copyOf(keys, capacity);
        sizes = Arrays.copyOf(sizes, capacity);
        streams = Arrays.copyOf(streams, capacity);
        lineNumbers = Arrays.copyOf(lineNumbers, capacity);
    }
}
