package dev.vmmkit.tools.replay;

import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.driver.HostTransfers;

import org.agrona.collections.Long2LongHashMap;

/**
 * Streams of this process that stand for a trace's recorded ones. A recorded stream is a handle of
 * the program that was traced: given to a real driver it names nothing (the CUDA driver reads it
 * as a pointer into a process that has gone). Each recorded stream but the ones every process
 * shares (0, CUDA's legacy 1 and per-thread 2) gets a stream made here on its first use, so that
 * frees on distinct streams stay on distinct streams; {@link #close} destroys them.
 */
public final class ReplayStreams implements AutoCloseable {
    private static final long NONE = Long.MIN_VALUE;
    private static final long LAST_SHARED_STREAM = 2;

    private final HostTransfers transfers;
    private final Long2LongHashMap made = new Long2LongHashMap(NONE);

    public ReplayStreams(HostTransfers transfers) {
        this.transfers = transfers;
    }

    /** This process's stream for each of {@code recorded}, in order. */
    public long[] standIns(long[] recorded) {
        long[] streams = new long[recorded.length];
        for (int i = 0; i < recorded.length; i++) {
            long stream = recorded[i];
            if (stream >= DeviceMemoryResource.DEVICE_WIDE_STREAM && stream <= LAST_SHARED_STREAM) { // a cudaFree's, or one every process shares
                streams[i] = stream;
                continue;
            }
            long standIn = made.get(stream);
            if (standIn == NONE) {
                standIn = transfers.createStream();
                made.put(stream, standIn);
            }
            streams[i] = standIn;
        }
        return streams;
    }

    /**
     * Destroys the streams made here, every one even if one fails (the first failure is thrown,
     * with the others suppressed); the allocator using them must have been closed first.
     */
    @Override
    public void close() {
        RuntimeException[] failure = {null};
        made.forEachLong((recorded, standIn) -> {
            try {
                transfers.destroyStream(standIn);
            } catch (RuntimeException e) {
                if (failure[0] == null) failure[0] = e;
                else failure[0].addSuppressed(e);
            }
        });
        made.clear();
        if (failure[0] != null) throw failure[0];
    }
}
