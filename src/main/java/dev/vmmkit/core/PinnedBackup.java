package dev.vmmkit.core;

import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.HostTransfers;
import dev.vmmkit.driver.StreamEvents;
import org.agrona.collections.LongArrayList;

/**
 * Copies of device ranges in pinned host memory: the kept contents of a paused tag.
 *
 * <p>The bytes go to pinned chunks of up to {@link #CHUNK_BYTES}, each allocated while the device
 * still copies into the one before (copies are queued, not waited for), so pinning host memory and
 * the bus transfer overlap. One stream of its own carries the copies; one event at the end says
 * when all have landed. A piece is one device range in one chunk; a range that crosses a chunk's
 * end becomes two pieces.
 */
final class PinnedBackup {
    /** Large enough for full bus speed per copy, small enough that pinning the next overlaps the copy of this one. */
    static final long CHUNK_BYTES = 256L << 20;

    private final HostTransfers transfers;
    private final StreamEvents events;
    /** The pinned chunks, in the order they were made. */
    private final LongArrayList chunks = new LongArrayList();
    /** Pieces as (device address, bytes, host address) triples. */
    private final LongArrayList pieces = new LongArrayList();

    PinnedBackup(HostTransfers transfers, StreamEvents events) {
        this.transfers = transfers;
        this.events = events;
    }

    /** The bytes this backup holds. */
    long bytes() {
        long sum = 0;
        for (int i = 1; i < pieces.size(); i += 3) sum += pieces.getLong(i);
        return sum;
    }

    /**
     * Copies the ranges {@code (vaAndBytes[2i], vaAndBytes[2i + 1])} (mapped, with access) to pinned
     * memory and waits until every copy has landed. On failure the chunks made here are freed (after
     * the copies already queued have finished) and the failure is thrown: nothing is kept.
     */
    void copyOut(LongArrayList vaAndBytes) {
        long total = 0;
        for (int i = 1; i < vaAndBytes.size(); i += 2) total += vaAndBytes.getLong(i);
        if (total == 0) return;
        int firstChunk = chunks.size();
        int firstPiece = pieces.size();
        long stream = transfers.createStream();
        try {
            long chunk = 0;
            long chunkSize = 0;
            long used = 0;
            long left = total;
            for (int i = 0; i < vaAndBytes.size(); i += 2) {
                long va = vaAndBytes.getLong(i);
                long bytes = vaAndBytes.getLong(i + 1);
                while (bytes > 0) {
                    if (used == chunkSize) {
                        chunkSize = Math.min(CHUNK_BYTES, left);
                        chunk = transfers.allocatePinned(chunkSize);
                        chunks.addLong(chunk);
                        used = 0;
                    }
                    long piece = Math.min(bytes, chunkSize - used);
                    transfers.copyToHost(chunk + used, va, piece, stream);
                    pieces.addLong(va);
                    pieces.addLong(piece);
                    pieces.addLong(chunk + used);
                    va += piece;
                    bytes -= piece;
                    used += piece;
                    left -= piece;
                }
            }
            waitFor(stream);
        } catch (RuntimeException e) {
            settle(stream, e);
            freeChunks(firstChunk, e);
            while (pieces.size() > firstPiece) pieces.removeAt(pieces.size() - 1);
            destroy(stream, e);
            throw e;
        }
        destroy(stream, null);
    }

    /**
     * Copies back every piece that lies in one of the ranges {@code (rangeVaAndBytes[2i],
     * rangeVaAndBytes[2i + 1])} (mapped, with access again) and waits
     * until all have landed. The chunks stay: {@link #free} gives them back. On failure the copies
     * already queued finish first, and the failure is thrown; a retry copies everything again.
     */
    void copyIn(LongArrayList rangeVaAndBytes) {
        if (pieces.isEmpty()) return;
        long stream = transfers.createStream();
        try {
            for (int i = 0; i < pieces.size(); i += 3) {
                long va = pieces.getLong(i);
                if (inAny(rangeVaAndBytes, va)) {
                    transfers.copyToDevice(va, pieces.getLong(i + 2), pieces.getLong(i + 1), stream);
                }
            }
            waitFor(stream);
        } catch (RuntimeException e) {
            settle(stream, e);
            destroy(stream, e);
            throw e;
        }
        destroy(stream, null);
    }

    /** Forgets the pieces in {@code [from, to)}: their range stayed mapped, so the device holds the bytes. */
    void dropPiecesIn(long from, long to) {
        int kept = 0;
        for (int i = 0; i < pieces.size(); i += 3) {
            long va = pieces.getLong(i);
            if (va - from >= 0 && va - from < to - from) continue;
            pieces.setLong(kept++, va);
            pieces.setLong(kept++, pieces.getLong(i + 1));
            pieces.setLong(kept++, pieces.getLong(i + 2));
        }
        while (pieces.size() > kept) pieces.removeAt(pieces.size() - 1);
    }

    /**
     * Frees every chunk. A chunk the driver refuses to free stays listed, so a later call retries;
     * the first refusal is thrown after the others were tried.
     */
    void free() {
        pieces.clear();
        DriverException first = null;
        int kept = 0;
        for (int i = 0; i < chunks.size(); i++) {
            try {
                transfers.freePinned(chunks.getLong(i));
            } catch (DriverException e) {
                if (first == null) first = e;
                chunks.setLong(kept++, chunks.getLong(i));
            }
        }
        while (chunks.size() > kept) chunks.removeAt(chunks.size() - 1);
        if (first != null) throw first;
    }

    private static boolean inAny(LongArrayList ranges, long va) {
        for (int i = 0; i < ranges.size(); i += 2) {
            if (va - ranges.getLong(i) >= 0 && va - ranges.getLong(i) < ranges.getLong(i + 1)) return true;
        }
        return false;
    }

    /** True when no chunk is held. */
    boolean isEmpty() {
        return chunks.isEmpty();
    }

    private void waitFor(long stream) {
        long event = events.create();
        try {
            events.record(event, stream);
            events.synchronize(event);
        } finally {
            events.destroy(event);
        }
    }

    /** After a failure: lets the copies already queued finish before their buffers go. */
    private void settle(long stream, RuntimeException cause) {
        try {
            waitFor(stream);
        } catch (RuntimeException e) {
            cause.addSuppressed(e);
            try {
                events.synchronizeDevice();
            } catch (RuntimeException again) {
                cause.addSuppressed(again);
            }
        }
    }

    private void freeChunks(int from, RuntimeException cause) {
        int kept = from;
        for (int i = from; i < chunks.size(); i++) {
            try {
                transfers.freePinned(chunks.getLong(i));
            } catch (RuntimeException e) {
                cause.addSuppressed(e);
                chunks.setLong(kept++, chunks.getLong(i)); // kept for a later free
            }
        }
        while (chunks.size() > kept) chunks.removeAt(chunks.size() - 1);
    }

    private void destroy(long stream, RuntimeException cause) {
        try {
            transfers.destroyStream(stream);
        } catch (RuntimeException e) {
            if (cause != null) cause.addSuppressed(e);
            // a stream that cannot be destroyed costs a few bytes; the copies are done
        }
    }
}
