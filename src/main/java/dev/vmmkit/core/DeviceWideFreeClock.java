package dev.vmmkit.core;

/**
 * When memory freed device-wide ({@link DeviceMemoryResource#DEVICE_WIDE_STREAM}, a cudaFree)
 * became reusable: a device synchronisation that started after the free has finished. A recorder
 * reads a {@linkplain #markAfterFree mark} right after each such free and writes the free's
 * completion once the mark is {@linkplain #covered covered}, so a replay of the trace sees each
 * block come back when the program's allocator saw it come back. Thread-safe; each call finds the
 * address's region and reads one volatile value, no driver call.
 */
public interface DeviceWideFreeClock {

    /** Right after the device-wide free of {@code address} returned: a mark for it. */
    long markAfterFree(long address);

    /** True once the free of {@code address} that read {@code mark} is covered (its memory is reusable). */
    boolean covered(long address, long mark);

    /**
     * How many of the calling thread's waits for such frees have given up so far (a request past
     * the budget waits for them at most {@code SlowPath.DEVICE_WIDE_FREE_WAIT_NANOS}, or not at
     * all during a stream capture): a recorder reads it around a request to tell whether the
     * request gave up, so a replay gives up there too. 0 for a resource that never waits.
     */
    default long waitsGivenUp() {
        return 0;
    }
}
