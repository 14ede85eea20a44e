package dev.vmmkit.core;

import dev.vmmkit.driver.HostTransfers;
import dev.vmmkit.driver.StreamEvents;
import org.agrona.collections.LongArrayList;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;

/**
 * Copies of device ranges in pinned host memory: the kept contents of a paused tag.
 *
 * <p>The bytes go to pinned chunks of up to {@link #CHUNK_BYTES} from {@link PinnedChunks}: kept
 * ones from an earlier pause, or chunks pinned by its threads while the device copies into the ones
 * before (copies are queued, not waited for), so pinning and the bus transfer overlap. One stream of
 * its own carries the copies; one event at the end says when all have landed. A piece is one device
 * range in one chunk; a range that crosses a chunk's end becomes two pieces. The chunks go back to
 * {@link PinnedChunks} once the bytes are home again.
 */
final class PinnedBackup {
    /** Large enough for full bus speed per copy, small enough that pinning the next overlaps the copy of this one. */
    static final long CHUNK_BYTES = 256L << 20;

    private final HostTransfers transfers;
    private final StreamEvents events;
    private final PinnedChunks pool;
    /** The pinned chunks as (address, bytes) pairs, in the order they were taken. */
    private final LongArrayList chunks = new LongArrayList();
    /** Pieces as (device address, bytes, host address) triples. */
    private final LongArrayList pieces = new LongArrayList();

    PinnedBackup(HostTransfers transfers, StreamEvents events, PinnedChunks pool) {
        this.transfers = transfers;
        this.events = events;
        this.pool = pool;
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
        long[] sizes = chunkSizes(total);
        List<CompletableFuture<Long>> pending = pool.take(sizes);
        int firstChunk = chunks.size();
        int firstPiece = pieces.size();
        int next = 0;
        long stream = 0;
        try {
            stream = transfers.createStream();
            long chunk = 0;
            long chunkSize = 0;
            long used = 0;
            for (int i = 0; i < vaAndBytes.size(); i += 2) {
                long va = vaAndBytes.getLong(i);
                long bytes = vaAndBytes.getLong(i + 1);
                while (bytes > 0) {
                    if (used == chunkSize) {
                        chunkSize = sizes[next];
                        chunk = await(pending.get(next++));
                        chunks.addLong(chunk);
                        chunks.addLong(chunkSize);
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
                }
            }
            waitFor(stream);
        } catch (RuntimeException e) {
            if (stream != 0) settle(stream, e);
            // Chunks taken here, and those still being pinned, go back to the pool: nothing is kept.
            for (int i = next; i < pending.size(); i++) {
                try {
                    pool.give(await(pending.get(i)), sizes[i]);
                } catch (RuntimeException failed) {
                    e.addSuppressed(failed);
                }
            }
            for (int i = firstChunk; i < chunks.size(); i += 2) pool.give(chunks.getLong(i), chunks.getLong(i + 1));
            while (chunks.size() > firstChunk) chunks.removeAt(chunks.size() - 1);
            while (pieces.size() > firstPiece) pieces.removeAt(pieces.size() - 1);
            if (stream != 0) destroy(stream, e);
            throw e;
        }
        destroy(stream, null);
    }

    /** Chunks of {@link #CHUNK_BYTES}, the last one the rest rounded up to 64 KiB (so kept chunks are reused). */
    private static long[] chunkSizes(long total) {
        int n = (int) ((total + CHUNK_BYTES - 1) / CHUNK_BYTES);
        long[] sizes = new long[n];
        for (int i = 0; i < n; i++) sizes[i] = CHUNK_BYTES;
        long last = total - (long) (n - 1) * CHUNK_BYTES;
        sizes[n - 1] = (last + 0xFFFF) & ~0xFFFFL;
        return sizes;
    }

    /** The chunk a future gives; its driver error as it was. */
    private static long await(CompletableFuture<Long> chunk) {
        try {
            return chunk.join();
        } catch (CompletionException e) {
            if (e.getCause() instanceof RuntimeException cause) throw cause;
            throw e;
        }
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

    /** Gives every chunk back to the pool, for the next pause; the backup holds nothing after. */
    void giveBack() {
        pieces.clear();
        for (int i = 0; i < chunks.size(); i += 2) pool.give(chunks.getLong(i), chunks.getLong(i + 1));
        chunks.clear();
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

    private void destroy(long stream, RuntimeException cause) {
        try {
            transfers.destroyStream(stream);
        } catch (RuntimeException e) {
            if (cause != null) cause.addSuppressed(e);
            // a stream that cannot be destroyed costs a few bytes; the copies are done
        }
    }
}
