package dev.vmmkit.lifetime;

/**
 * A snapshot of a {@link TensorDevice}'s accounting.
 *
 * @param liveTensors  tensors holding memory now
 * @param liveBytes    their bytes
 * @param peakLiveBytes most live bytes at once
 * @param allocations  tensors that ever got memory
 * @param leaks        tensors the leak detector found unreachable with a count above zero
 * @param leakedBytes  bytes given back from them
 */
public record TensorStats(long liveTensors, long liveBytes, long peakLiveBytes, long allocations,
                          long leaks, long leakedBytes) {
}
