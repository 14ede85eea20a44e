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

/**
 * Pinned host chunks for the kept contents of paused tags, kept for reuse. Pinning host memory
 * (cuMemHostAlloc: fault in, lock, map for the device) is several times slower than the bus copy
 * into it, so a pause that pinned its chunks one by one would run at the pinning speed. Two things
 * keep the copies at bus speed: chunks a resume gave back are kept and serve the next pause, and
 * chunks still to be pinned are pinned by {@link #PINNING_THREADS} threads ahead of the copies.
 * {@link #freeAll} gives everything back (the manager closes, or the program asks).
 */
final class PinnedChunks {
    /** Threads pinning chunks ahead of a pause's copies. */
    static final int PINNING_THREADS = 4;

    private final HostTransfers transfers;
    /** Kept chunks by size. Guarded by this. */
    private final TreeMap<Long, ArrayDeque<Long>> kept = new TreeMap<>();
    private long keptBytes;
    private ExecutorService pinning;

    PinnedChunks(HostTransfers transfers) {
        this.transfers = transfers;
    }

    /**
     * One chunk per size of {@code sizes}, in order: kept ones where a kept chunk of that size
     * exists, the others being pinned on the pinning threads. Each future gives a chunk's address,
     * or fails with the driver's error.
     */
    List<CompletableFuture<Long>> take(long[] sizes) {
        List<CompletableFuture<Long>> out = new ArrayList<>(sizes.length);
        for (long size : sizes) {
            long reused = takeKept(size);
            if (reused != 0) {
                out.add(CompletableFuture.completedFuture(reused));
            } else {
                out.add(CompletableFuture.supplyAsync(() -> transfers.allocatePinned(size), pinningThreads()));
            }
        }
        return out;
    }

    /** Keeps a chunk no copy uses any more, for the next pause. */
    synchronized void give(long address, long size) {
        kept.computeIfAbsent(size, s -> new ArrayDeque<>()).push(address);
        keptBytes += size;
    }

    /** Bytes of pinned host memory kept for reuse. */
    synchronized long keptBytes() {
        return keptBytes;
    }

    /**
     * Frees every kept chunk. Chunks the driver refuses to free stay kept; the first refusal is
     * thrown after the others were tried.
     */
    void freeAll() {
        List<long[]> all = new ArrayList<>();
        synchronized (this) {
            for (Map.Entry<Long, ArrayDeque<Long>> e : kept.entrySet()) {
                for (long address : e.getValue()) all.add(new long[]{address, e.getKey()});
            }
            kept.clear();
            keptBytes = 0;
        }
        DriverException first = null;
        for (long[] chunk : all) {
            try {
                transfers.freePinned(chunk[0]);
            } catch (DriverException e) {
                if (first == null) first = e;
                give(chunk[0], chunk[1]);
            }
        }
        if (first != null) throw first;
    }

    /** Frees every kept chunk and stops the pinning threads. */
    void close() {
        ExecutorService threads;
        synchronized (this) {
            threads = pinning;
            pinning = null;
        }
        if (threads != null) threads.shutdownNow();
        try {
            freeAll();
        } catch (DriverException ignored) {
            // closing anyway: pinned memory goes with the process
        }
    }

    private synchronized long takeKept(long size) {
        ArrayDeque<Long> same = kept.get(size);
        if (same == null || same.isEmpty()) return 0;
        keptBytes -= size;
        return same.pop();
    }

    private synchronized ExecutorService pinningThreads() {
        if (pinning == null) {
            pinning = Executors.newFixedThreadPool(PINNING_THREADS, r -> {
                Thread t = new Thread(r, "vmmkit-pinning");
                t.setDaemon(true);
                return t;
            });
        }
        return pinning;
    }
}
