package dev.vmmkit.core;

import dev.vmmkit.core.PinnedChunks.Chunk;
import dev.vmmkit.driver.HostTransfers;
import dev.vmmkit.driver.StreamEvents;
import org.agrona.collections.LongArrayList;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;

/**
 * Copies of device ranges in pinned host memory: the kept contents of a paused tag.
 *
 * <p>The bytes go to pinned chunks of up to {@link #CHUNK_BYTES} from {@link PinnedChunks}: ones
 * pinned ahead or kept from an earlier pause, or chunks pinned by its threads while the device
 * copies into the ones before (copies are queued, not waited for), so pinning and the bus transfer
 * overlap. The copies go out on {@link CopyStreams} (two streams, no wait between copies); each
 * piece's landing can be awaited by address ({@link Outgoing}), so that the caller gives back the
 * memory already copied while the rest still copies. A piece is one device range in one chunk; a
 * range that crosses a chunk's end becomes two pieces. The chunks go back to {@link PinnedChunks}
 * once the bytes are home again.
 */
final class PinnedBackup {
    /** Large enough for full bus speed per copy, small enough that pinning the next overlaps the copy of this one. */
    static final long CHUNK_BYTES = 256L << 20;
    /** Chunk sizes are multiples of this (so a kept chunk fits the next pause of the same bytes). */
    static final long CHUNK_ALIGNMENT = 64L << 10;

    private final HostTransfers transfers;
    private final StreamEvents events;
    private final PinnedChunks pool;
    /** The pinned chunks held, in the order they were taken. */
    private final List<Chunk> chunks = new java.util.ArrayList<>();
    /** Pieces as (device address, bytes, host address) triples, in device address order. */
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
     * Queues copies of the ranges {@code (vaAndBytes[2i], vaAndBytes[2i + 1])} (mapped, with access,
     * in address order) to pinned memory; the caller awaits them through what it returns, then
     * {@link Outgoing#finish}es it (or {@link Outgoing#abandon}s it after a failure, and drops the
     * pieces of the ranges it keeps mapped). If queueing fails, the chunks taken here go back to
     * the pool (after the copies already queued have finished) and the failure is thrown: nothing
     * is kept.
     */
    Outgoing copyOut(LongArrayList vaAndBytes) {
        long total = 0;
        for (int i = 1; i < vaAndBytes.size(); i += 2) total += vaAndBytes.getLong(i);
        int firstPiece = pieces.size();
        if (total == 0) return new Outgoing(null, firstPiece);
        List<CompletableFuture<Chunk>> pending = pool.take(total);
        int firstChunk = chunks.size();
        int next = 0;
        CopyStreams streams = new CopyStreams(transfers, events);
        try {
            Chunk chunk = null;
            long used = 0;
            for (int i = 0; i < vaAndBytes.size(); i += 2) {
                long va = vaAndBytes.getLong(i);
                long bytes = vaAndBytes.getLong(i + 1);
                while (bytes > 0) {
                    if (chunk == null || used == chunk.bytes()) {
                        chunk = await(pending.get(next++));
                        chunks.add(chunk);
                        used = 0;
                    }
                    long piece = Math.min(bytes, chunk.bytes() - used);
                    streams.toHost(chunk.address() + used, va, piece);
                    streams.markLast(); // mark k: this copy-out's piece k
                    pieces.addLong(va);
                    pieces.addLong(piece);
                    pieces.addLong(chunk.address() + used);
                    va += piece;
                    bytes -= piece;
                    used += piece;
                }
            }
            return new Outgoing(streams, firstPiece);
        } catch (RuntimeException e) {
            streams.abandon(e);
            // Chunks taken here, and those still being pinned, go back to the pool: nothing is kept.
            for (int i = next; i < pending.size(); i++) giveBackWhenLanded(pending.get(i), e);
            next = pending.size();
            while (chunks.size() > firstChunk) pool.give(chunks.removeLast());
            while (pieces.size() > firstPiece) pieces.removeAt(pieces.size() - 1);
            throw e;
        } finally {
            // Chunks larger than asked (kept from another size) may leave the last ones unused.
            for (int i = next; i < pending.size(); i++) giveBackWhenLanded(pending.get(i), null);
        }
    }

    /** The copies of one {@link #copyOut} in flight, awaited in address order. */
    final class Outgoing {
        private final CopyStreams streams;
        private final int firstPiece;
        /** Pieces of this copy-out known to have landed. */
        private int landed;

        private Outgoing(CopyStreams streams, int firstPiece) {
            this.streams = streams;
            this.firstPiece = firstPiece;
        }

        /** Waits until every piece that starts below {@code end} has landed. */
        void awaitBelow(long end) {
            if (streams == null) return;
            while (firstPiece + 3 * landed < pieces.size() && pieces.getLong(firstPiece + 3 * landed) - end < 0) {
                streams.awaitMark(landed);
                landed++;
            }
        }

        /** Waits until every copy has landed. */
        void finish() {
            if (streams != null) streams.finish();
        }

        /** After a failure: lets the copies already queued finish, before their chunks can be used again. */
        void abandon(RuntimeException cause) {
            if (streams != null) streams.abandon(cause);
        }
    }

    private void giveBackWhenLanded(CompletableFuture<Chunk> chunk, RuntimeException cause) {
        try {
            pool.give(await(chunk));
        } catch (RuntimeException failed) {
            if (cause != null) cause.addSuppressed(failed);
        }
    }

    /** {@code bytes} rounded up to {@link #CHUNK_ALIGNMENT}. */
    static long roundToChunk(long bytes) {
        return (bytes + CHUNK_ALIGNMENT - 1) & -CHUNK_ALIGNMENT;
    }

    /** The chunk a future gives; its driver error as it was. */
    private static Chunk await(CompletableFuture<Chunk> chunk) {
        try {
            return chunk.join();
        } catch (CompletionException e) {
            if (e.getCause() instanceof RuntimeException cause) throw cause;
            throw e;
        }
    }

    /**
     * Starts copying back: {@link Restore#copyInto} queues the pieces of one range as soon as it is
     * mapped with access again, so copies into the first ranges run while the later ones are
     * mapped; {@link Restore#finish} waits for all.
     */
    Restore restore() {
        return new Restore();
    }

    /** One resume's copies back. */
    final class Restore {
        private CopyStreams streams;

        /** Queues a copy of every piece in {@code [va, va + bytes)} (mapped, with access again). */
        void copyInto(long va, long bytes) {
            for (int i = 0; i < pieces.size(); i += 3) {
                long at = pieces.getLong(i);
                if (at - va < 0 || at - va >= bytes) continue;
                if (streams == null) streams = new CopyStreams(transfers, events);
                streams.toDevice(at, pieces.getLong(i + 2), pieces.getLong(i + 1));
            }
        }

        /** Waits until every queued copy has landed. */
        void finish() {
            if (streams != null) streams.finish();
        }

        /** After a failure: lets the copies already queued finish (a retry copies everything again). */
        void abandon(RuntimeException cause) {
            if (streams != null) streams.abandon(cause);
        }
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
        for (Chunk c : chunks) pool.give(c);
        chunks.clear();
    }

    /** True when no chunk is held. */
    boolean isEmpty() {
        return chunks.isEmpty();
    }
}
