package dev.vmmkit.tools.replay;

import dev.vmmkit.driver.DeviceBytes;

/**
 * The {@code --verify} check: right after an allocation, its first and last 4 KiB (all of it when
 * smaller) are filled with a pattern derived from the trace key; right before its free they are read
 * back and compared. A difference means the allocator handed the same memory to two live
 * allocations, or unmapped memory that was still in use. Bytes go through the driver's
 * {@link DeviceBytes}, so the check works on the host emulation and on the GPU alike.
 */
public final class PatternCheck {
    /** Bytes checked at each end of an allocation: one small page. */
    static final long PIECE_BYTES = 4096;

    private final DeviceBytes bytes;

    public PatternCheck(DeviceBytes bytes) {
        this.bytes = bytes;
    }

    /** Writes the pattern of {@code key} into the head and tail of the allocation at {@code address}. */
    public void stamp(long key, long address, long size) {
        long piece = piece(size);
        if (piece == 0) return;
        bytes.fill(address, piece, key);
        long tail = tailOffset(size, piece);
        if (tail < (size & -8L)) bytes.fill(address + tail, (size & -8L) - tail, ~key);
    }

    /**
     * Reads back what {@link #stamp} wrote.
     *
     * @return -1 when intact, else the offset inside the allocation of the first changed word
     */
    public long firstDifference(long key, long address, long size) {
        long piece = piece(size);
        if (piece == 0) return -1;
        long difference = bytes.firstMismatch(address, piece, key);
        if (difference >= 0) return difference;
        long tail = tailOffset(size, piece);
        if (tail >= (size & -8L)) return -1;
        difference = bytes.firstMismatch(address + tail, (size & -8L) - tail, ~key);
        return difference < 0 ? -1 : tail + difference;
    }

    /** Whole 8-byte words only: byte access works in words. */
    private static long piece(long size) {
        return Math.min(size, PIECE_BYTES) & -8L;
    }

    /** Where the tail piece starts: the last {@code piece} bytes, but never inside the head piece. */
    private static long tailOffset(long size, long piece) {
        return Math.max(piece, (size & -8L) - piece);
    }
}
