package dev.vmmkit.driver;

/**
 * Pinned host memory and stream-ordered copies between it and device memory (CUDA:
 * cuMemHostAlloc, cuMemFreeHost, cuStreamCreate, cuMemcpyDtoHAsync, cuMemcpyHtoDAsync). A pinned
 * buffer is page-locked, so the device copies it at the bus's full speed and a copy returns
 * before it has run. Completion is observed with {@link VmmDriver#events()}: record an event on the
 * copy's stream, then wait for it.
 *
 * <p>Host addresses are plain {@code long}s, like device addresses. Thread-safe.
 */
public interface HostTransfers {

    /** Allocates {@code bytes} (> 0) of pinned host memory; returns its address. */
    long allocatePinned(long bytes);

    /** Frees pinned memory from {@link #allocatePinned}; copies into or out of it must have completed. */
    void freePinned(long address);

    /** A stream of its own, which waits for no other stream (CU_STREAM_NON_BLOCKING). */
    long createStream();

    /** Destroys a stream from {@link #createStream}. */
    void destroyStream(long stream);

    /** Queues a copy of {@code bytes} from device address {@code va} (mapped, with access) to pinned {@code host}. */
    void copyToHost(long host, long va, long bytes, long stream);

    /** Queues a copy of {@code bytes} from pinned {@code host} to device address {@code va} (mapped, with access). */
    void copyToDevice(long va, long host, long bytes, long stream);
}
