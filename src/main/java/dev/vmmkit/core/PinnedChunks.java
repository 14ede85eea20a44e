package dev.vmmkit.core;

import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.HostTransfers;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Pinned host chunks for the kept contents of paused tags, kept for reuse. Pinning host memory
 * (cuMemHostAlloc: fault in, lock, map for the device) is several times slower than the bus copy
 * into it, so a pause that pinned its chunks one by one would run at the pinning speed. Three
 * things keep the copies at bus speed: chunks pinned ahead while the tag was allocated
 * ({@link PinAhead} calls {@link #pinAhead}), chunks a resume gave back, and chunks still missing
 * pinned by {@link #PINNING_THREADS} threads ahead of the copies. A pause takes a chunk still
 * being pinned ahead as it lands (or pins its own when that fails). {@link #freeAll} gives the
 * kept chunks back (the program asks); close frees everything.
 */
final class PinnedChunks {
    /** Threads pinning chunks ahead of a pause's copies. */
    static final int PINNING_THREADS = 4;

    /** A pinned chunk: its host address and size. */
    record Chunk(long address, long bytes) {
    }

    /** A chunk being pinned ahead; {@code landed} completes when it is pinned (or fails). */
    private record Arriving(long bytes, CompletableFuture<Chunk> landed) {
    }

    private final HostTransfers transfers;
    /** Kept chunks by size. Guarded by this. */
    private final TreeMap<Long, ArrayDeque<Long>> kept = new TreeMap<>();
    private long keptBytes;
    /** Chunks being pinned ahead, no pause's yet. Guarded by this. */
    private final List<Arriving> arriving = new ArrayList<>();
    private long arrivingBytes;
    private boolean closed;
    /** Every byte of pinned host memory held now: kept, in backups, in copies under way. */
    private final AtomicLong pinnedBytes = new AtomicLong();
    private ExecutorService pinning;

    PinnedChunks(HostTransfers transfers) {
        this.transfers = transfers;
    }

    /**
     * Chunks holding at least {@code total} bytes, in the order to fill them: the kept ones first
     * (the smallest that holds what is left, else the largest), then ones being pinned ahead, then
     * chunks of up to {@link PinnedBackup#CHUNK_BYTES} pinned now on the pinning threads. Each
     * future gives the chunk, or fails with the driver's error.
     */
    List<CompletableFuture<Chunk>> take(long total) {
        List<CompletableFuture<Chunk>> out = new ArrayList<>();
        long left = total;
        while (left > 0) {
            long want = PinnedBackup.roundToChunk(Math.min(PinnedBackup.CHUNK_BYTES, left));
            long[] got = new long[1];
            CompletableFuture<Chunk> chunk = takeKeptOrArriving(want, got);
            if (chunk == null) {
                chunk = CompletableFuture.supplyAsync(() -> pin(want), pinningThreads());
                got[0] = want;
            }
            out.add(chunk);
            left -= got[0];
        }
        return out;
    }

    /** A kept chunk, else one being pinned ahead; its size in {@code bytes[0]}; null when there is none. */
    private synchronized CompletableFuture<Chunk> takeKeptOrArriving(long want, long[] bytes) {
        Map.Entry<Long, ArrayDeque<Long>> fit = kept.ceilingEntry(want);
        if (fit == null) fit = kept.lastEntry();
        if (fit != null) {
            long address = fit.getValue().pop();
            if (fit.getValue().isEmpty()) kept.remove(fit.getKey());
            keptBytes -= fit.getKey();
            bytes[0] = fit.getKey();
            return CompletableFuture.completedFuture(new Chunk(address, fit.getKey()));
        }
        if (arriving.isEmpty()) return null;
        Arriving a = arriving.removeFirst();
        arrivingBytes -= a.bytes();
        bytes[0] = a.bytes();
        // Pinning ahead failed: this pause pins its own chunk of that size.
        return a.landed().exceptionallyCompose(failed -> CompletableFuture.supplyAsync(() -> pin(a.bytes()), pinningThreads()));
    }

    /**
     * Pins a chunk of {@code bytes} on the calling thread and keeps it, unless a pause took it while
     * it was being pinned (the pause gets it). Throws the driver's error.
     */
    void pinAhead(long bytes) {
        Arriving a = new Arriving(bytes, new CompletableFuture<>());
        synchronized (this) {
            if (closed) return;
            arriving.add(a);
            arrivingBytes += bytes;
        }
        Chunk chunk;
        try {
            chunk = pin(bytes);
        } catch (RuntimeException e) {
            forgetArriving(a);
            a.landed().completeExceptionally(e);
            throw e;
        }
        boolean free = false;
        synchronized (this) {
            if (closed) {
                free = forgetArriving(a);
            } else if (arriving.remove(a)) {
                arrivingBytes -= bytes;
                keep(chunk.address(), bytes);
            }
        }
        if (free) freeQuietly(chunk);
        a.landed().complete(chunk);
    }

    private synchronized boolean forgetArriving(Arriving a) {
        if (!arriving.remove(a)) return false;
        arrivingBytes -= a.bytes();
        return true;
    }

    /** Keeps a chunk no copy uses any more, for the next pause. */
    synchronized void give(Chunk chunk) {
        if (closed) {
            freeQuietly(chunk);
            return;
        }
        keep(chunk.address(), chunk.bytes());
    }

    private void keep(long address, long bytes) {
        kept.computeIfAbsent(bytes, s -> new ArrayDeque<>()).push(address);
        keptBytes += bytes;
    }

    /** Bytes of pinned host memory kept for the next pause. */
    synchronized long keptBytes() {
        return keptBytes;
    }

    /** Bytes kept or being pinned ahead: what the next pause finds without pinning. */
    synchronized long readyBytes() {
        return keptBytes + arrivingBytes;
    }

    /** Every byte of pinned host memory held now (kept, holding paused tags' contents, or being copied). */
    long pinnedBytes() {
        return pinnedBytes.get();
    }

    /**
     * Frees every kept chunk. Chunks the driver refuses to free stay kept; the first refusal is
     * thrown after the others were tried.
     */
    void freeAll() {
        DriverException first = null;
        for (Chunk chunk : takeAllKept()) {
            try {
                free(chunk);
            } catch (DriverException e) {
                if (first == null) first = e;
                give(chunk);
            }
        }
        if (first != null) throw first;
    }

    /** Frees every kept chunk, and those pinned ahead as they land, and stops the pinning threads. */
    void close() {
        ExecutorService threads;
        synchronized (this) {
            closed = true;
            threads = pinning;
            pinning = null;
        }
        if (threads != null) threads.shutdownNow();
        for (Chunk chunk : takeAllKept()) freeQuietly(chunk);
    }

    private synchronized List<Chunk> takeAllKept() {
        List<Chunk> all = new ArrayList<>();
        for (Map.Entry<Long, ArrayDeque<Long>> e : kept.entrySet()) {
            for (long address : e.getValue()) all.add(new Chunk(address, e.getKey()));
        }
        kept.clear();
        keptBytes = 0;
        return all;
    }

    private Chunk pin(long bytes) {
        long address = transfers.allocatePinned(bytes);
        pinnedBytes.addAndGet(bytes);
        return new Chunk(address, bytes);
    }

    private void free(Chunk chunk) {
        transfers.freePinned(chunk.address());
        pinnedBytes.addAndGet(-chunk.bytes());
    }

    private void freeQuietly(Chunk chunk) {
        try {
            free(chunk);
        } catch (RuntimeException ignored) {
            // closing anyway: pinned memory goes with the process
        }
    }

    private synchronized ExecutorService pinningThreads() {
        if (pinning == null) {
            if (closed) throw new IllegalStateException("the allocator is closed");
            pinning = Executors.newFixedThreadPool(PINNING_THREADS, r -> {
                Thread t = new Thread(r, "vmmkit-pinning");
                t.setDaemon(true);
                return t;
            });
        }
        return pinning;
    }
}
