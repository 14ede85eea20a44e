package dev.vmmkit.trace;

/**
 * What PyTorch's caching allocator held while a snapshot was recorded, from the snapshot itself.
 *
 * @param reservedPeakBytes      most bytes PyTorch reserved from the driver at once (its segments:
 *                               {@code torch.cuda.max_memory_reserved()} when recording began with the program)
 * @param livePeakBytes          most bytes of live tensors at once (the trace's peak live)
 * @param reservedAtOp           PyTorch's reserved bytes when each operation of the trace ran
 */
public record RecordedMemory(long reservedPeakBytes, long livePeakBytes, long[] reservedAtOp) {
}
