package dev.vmmkit.trace;

import java.util.Arrays;
import java.util.BitSet;

/**
 * Rows of (kind, key, size, stream, line) in growing primitive arrays: 29 bytes a row, no object
 * per row. The readers collect requests ({@link TraceBuilder}) and snapshot entries
 * ({@link SnapshotEntries}) in it.
 */
final class OpColumns {
    private int count;
    private byte[] kinds = new byte[1024];
    private long[] keys = new long[1024];
    private long[] sizes = new long[1024];
    private long[] streams = new long[1024];
    private int[] lines = new int[1024];

    void append(byte kind, long key, long size, long stream, int line) {
        if (count == kinds.length) grow();
        kinds[count] = kind;
        keys[count] = key;
        sizes[count] = size;
        streams[count] = stream;
        lines[count] = line;
        count++;
    }

    /** Appends every row of {@code other}, in order. */
    void appendAll(OpColumns other) {
        for (int i = 0; i < other.count; i++) {
            append(other.kinds[i], other.keys[i], other.sizes[i], other.streams[i], other.lines[i]);
        }
    }

    int count() {
        return count;
    }

    byte kind(int i) {
        return kinds[i];
    }

    long key(int i) {
        return keys[i];
    }

    long size(int i) {
        return sizes[i];
    }

    long stream(int i) {
        return streams[i];
    }

    int line(int i) {
        return lines[i];
    }

    /** The rows as a trace; the arrays are trimmed so a held trace costs only what it holds. */
    AllocationTrace toTrace(String name, int allocs, int covers, int maxLiveAllocations, long peakLiveBytes,
                            int allocationsBeforeTrace, RecordedMemory recorded, BitSet waitsGivenUp) {
        return new AllocationTrace(name, count, Arrays.copyOf(kinds, count), Arrays.copyOf(keys, count),
                Arrays.copyOf(sizes, count), Arrays.copyOf(streams, count), Arrays.copyOf(lines, count),
                allocs, covers, maxLiveAllocations, peakLiveBytes, allocationsBeforeTrace, recorded, waitsGivenUp);
    }

    private void grow() {
        int capacity = Math.multiplyExact(kinds.length, 2);
        kinds = Arrays.copyOf(kinds, capacity);
        keys = Arrays.copyOf(keys, capacity);
        sizes = Arrays.copyOf(sizes, capacity);
        streams = Arrays.copyOf(streams, capacity);
        lines = Arrays.copyOf(lines, capacity);
    }
}
