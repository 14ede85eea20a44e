package dev.vmmkit.trace;

/**
 * The trace entries of one device of a PyTorch memory snapshot that matter for memory, in order, in
 * primitive arrays (29 bytes an entry): the application's {@code alloc} and {@code free_completed},
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

    /** Kind is the action, key the address, line the entry's 1-based place in its device trace (all actions counted). */
    private final OpColumns rows = new OpColumns();
    private int seen;

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
        if (action != IGNORED) rows.append(action, addr, size, stream, seen);
    }

    int count() {
        return rows.count();
    }

    byte action(int i) {
        return rows.kind(i);
    }

    long addr(int i) {
        return rows.key(i);
    }

    long size(int i) {
        return rows.size(i);
    }

    long stream(int i) {
        return rows.stream(i);
    }

    /** 1-based place of entry {@code i} in its device trace, all actions counted. */
    int place(int i) {
        return rows.line(i);
    }
}
