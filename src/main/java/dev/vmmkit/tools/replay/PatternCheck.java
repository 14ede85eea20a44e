package dev.vmmkit.tools.replay;

/**
 * The {@code --verify} check: right after an allocation, its first and last 4 KiB (all of it when
 * smaller) are filled with a pattern derived from the trace key; right before its free they are read
 * back and compared. A difference means the allocator handed the same memory to two live
 * allocations, or unmapped memory that was still in use.
 *
 * <p>The pattern depends on the key and on the byte's offset inside the allocation, so head and tail
 * agree where they overlap and two allocations never share a pattern by accident. Buffers are made
 * once; checking allocates nothing.
 */
public final class PatternCheck {
    /** Bytes checked at each end of an allocation: one small page. */
    static final int PIECE_BYTES = 4096;

    private final DeviceBytes bytes;
    private final byte[] buffer = new byte[PIECE_BYTES];

    public PatternCheck(DeviceBytes bytes) {
        this.bytes = bytes;
    }

    /** Writes the pattern of {@code key} into the head and tail of the allocation at {@code address}. */
    public void stamp(long key, long address, long size) {
        if (size == 0) return;
        int head = piece(size);
        fill(key, 0, head);
        bytes.write(address, buffer, head);
        long tailOffset = size - head;
        if (tailOffset > 0) {
            fill(key, tailOffset, head);
            bytes.write(address + tailOffset, buffer, head);
        }
    }

    /**
     * Reads back what {@link #stamp} wrote.
     *
     * @return -1 when intact, else the offset inside the allocation of the first changed byte
     */
    public long firstDifference(long key, long address, long size) {
        if (size == 0) return -1;
        int head = piece(size);
        long difference = compare(key, address, 0, head);
        long tailOffset = size - head;
        if (difference < 0 && tailOffset > 0) difference = compare(key, address, tailOffset, head);
        return difference;
    }

    /** The byte the pattern of {@code key} puts at {@code offset} of an allocation. */
    static byte expected(long key, long offset) {
        long word = mix(key + (offset >>> 3));
        return (byte) (word >>> ((offset & 7) << 3));
    }

    private long compare(long key, long address, long offset, int length) {
        bytes.read(address + offset, buffer, length);
        for (int i = 0; i < length; i++) {
            if (buffer[i] != expected(key, offset + i)) return offset + i;
        }
        return -1;
    }

    private void fill(long key, long offset, int length) {
        for (int i = 0; i < length; i++) buffer[i] = expected(key, offset + i);
    }

    private static int piece(long size) {
        return (int) Math.min(size, PIECE_BYTES);
    }

    /** SplitMix64's finaliser: neighbouring inputs give unrelated outputs. */
    private static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
        z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
        return z ^ (z >>> 31);
    }
}
