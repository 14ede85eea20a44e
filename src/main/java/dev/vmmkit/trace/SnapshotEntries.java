package dev.vmmkit.trace;

import java.util.Arrays;

/**
 * The trace entries of one device of a PyTorch memory snapshot that matter for memory, in order, in
 * primitive arrays (25 bytes an entry): the application's {@code alloc} and {@code free_completed},
 * and the allocator's own {@code segment_*} traffic. {@code free_requested}, {@code snapshot},
 * {@code oom} and actions a later PyTorch may add are dropped as they arrive.
 */
final class SnapshotEntries {
    static final byte ALLOC = 0;
    static final byte FREE_COMPLETED = 1;
    /** {@code segment_alloc} and {@code segment_map}: the allocator reserved {@code size} more bytes. */
    static final byte SEGMENT_GROW = 2;
    /** {@code segment_free} and {@code segment_unmap}: it gave {@code size} bytes back. */
    static final byte SEGMENT_SHRINK = 3;
    /** Any other action: not kept. */
    static final byte IGNORED = 4;

    private int count;
    private byte[] actions = new byte[256];
    private long[] addrs = new long[256];
    private long[] sizes = new long[256];
    private long[] streams = new long[256];
    /** Entries of the device trace before dropping the ignored ones; gives each kept one its 1-based place. */
    private int seen;
    private int[] places = new int[256];

    static byte actionCode(String action) {
        return switch (action) {
            case "alloc" -> ALLOC;
            case "free_completed" -> FREE_COMPLETED;
            case "segment_alloc", "segment_map" -> SEGMENT_GROW;
            case "segment_free", "segment_unmap" -> SEGMENT_SHRINK;
            default -> IGNORED;
        };
    }

    void add(byte action, long addr, long size, long stream) {
        seen++;
        if (action == IGNORED) return;
        if (count == actions.length) grow();
        actions[count] = action;
        addrs[count] = addr;
        sizes[count] = size;
        streams[count] = stream;
        places[count] = seen;
        count++;
    }

    int count() {
        return count;
    }

    byte action(int i) {
        return actions[i];
    }

    long addr(int i) {
        return addrs[i];
    }

    long size(int i) {
        return sizes[i];
    }

    long stream(int i) {
        return streams[i];
    }

    /** 1-based place of entry {@code i} in its device trace, all actions counted. */
    int place(int i) {
        return places[i];
    }

    private void grow() {
        int capacity = Math.multiplyExact(actions.length, 2);
        actions = Arrays.copyOf(actions, capacity);
        addrs = Arrays.copyOf(addrs, capacity);
        sizes = Arrays.copyOf(sizes, capacity);
        streams = Arrays.copyOf(streams, capacity);
        places = Arrays.copyOf(places, capacity);
    }
}
