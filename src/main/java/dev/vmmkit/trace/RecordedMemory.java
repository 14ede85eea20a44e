package dev.vmmkit.trace;

/**
 * What PyTorch's caching allocator held while a snapshot was recorded, from the snapshot itself.
 *
 * @param reservedPeakBytes      most bytes PyTorch reserved from the driver at once (its segments:
 *                               {@code torch.cuda.max_memory_reserved()} when recording began with the program)
 * @param livePeakBytes          most bytes of live tensors at once (the trace's peak live)
 * @param allocationsBeforeTrace allocations made before the trace's first entry (freed in the trace, or still
 *                               live in the snapshot's segments) that seed the replay; above 0 the trace was
 *                               truncated (PyTorch keeps the last {@code max_entries} entries) or began late
 * @param reservedAtOp           PyTorch's reserved bytes when each operation of the trace ran
 */
public record RecordedMemory(long reservedPeakBytes, long livePeakBytes, int allocationsBeforeTrace,
                             long[] reservedAtOp) {

    /** True when the trace does not begin with the program: a ring buffer cut it, or recording began late. */
    public boolean truncated() {
        return allocationsBeforeTrace > 0;
    }
}
