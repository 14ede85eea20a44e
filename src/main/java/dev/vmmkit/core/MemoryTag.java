package dev.vmmkit.core;

import dev.vmmkit.driver.HostTransfers;
import dev.vmmkit.driver.StreamEvents;

import java.util.Arrays;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * One memory tag: the allocations made while a thread was in a region of that name, in regions of
 * their own (their own reserved ranges and handles, shared with no other tag), so that a pause
 * gives back every page of the tag and nothing else.
 *
 * <p>Allocations hold the gate's read lock, pause and resume its write lock: a pause waits for
 * allocations into the tag in progress, and an allocation never sees a half-paused region. Frees
 * do not take the gate (they are bookkeeping only), so they work while the tag is paused.
 */
final class MemoryTag {
    /** Makes a region of at least the given bytes for a tag. */
    interface RegionMaker {
        RegionHeap make(MemoryTag tag, long bytes);
    }

    final String name;
    private volatile boolean keepContents;
    private final ReentrantReadWriteLock gate = new ReentrantReadWriteLock();
    private final Object regionsLock = new Object();
    private volatile RegionHeap[] regions = new RegionHeap[0];
    private volatile RegionPause[] pauses = new RegionPause[0];
    private volatile boolean running = true;
    /** Every page of the tag is released (the last pause completed). */
    private boolean pausedCompletely;

    // Figures, written under the gate's write lock.
    private volatile long pauseCount;
    private volatile long resumeCount;
    private volatile long pauseNanos;
    private volatile long resumeNanos;
    private volatile long lastPauseNanos;
    private volatile long lastResumeNanos;
    private volatile long keptBytes;
    private volatile long failures;
    /** Physical bytes given back now, set after each pause and resume. */
    private volatile long releasedNow;

    MemoryTag(String name, boolean keepContents) {
        this.name = name;
        this.keepContents = keepContents;
    }

    /** The tag's setting, shared by all its allocations; the latest region opened sets it. */
    void keepContents(boolean keep) {
        keepContents = keep;
    }

    RegionHeap[] regions() {
        return regions;
    }

    boolean keepsContents() {
        return keepContents;
    }

    /**
     * The bytes a pause would copy now, when the tag keeps its contents and runs; else 0 (also
     * while a pause or resume is under way, which this does not wait for).
     */
    long bytesToKeepIfRunning() {
        if (!keepContents || !running || !gate.readLock().tryLock()) return 0;
        try {
            if (!running) return 0;
            long sum = 0;
            for (RegionPause p : pauses) sum += p.bytesToKeep();
            return sum;
        } finally {
            gate.readLock().unlock();
        }
    }

    /** Allocates {@code bytes} (aligned; {@code requested} asked) in the tag's regions, adding one when they are full. */
    long allocate(long bytes, long requested, long stream, RegionMaker maker) {
        gate.readLock().lock();
        try {
            if (!running) throw new TagPausedException(name);
            RegionHeap[] mine = regions;
            for (int i = mine.length - 1; i >= 0; i--) {
                try {
                    return mine[i].allocate(bytes, requested, stream);
                } catch (RegionHeap.RegionFullException full) {
                    // an older region, then a new one
                }
            }
            return addRegion(bytes, maker).allocate(bytes, requested, stream);
        } finally {
            gate.readLock().unlock();
        }
    }

    private RegionHeap addRegion(long bytes, RegionMaker maker) {
        synchronized (regionsLock) {
            RegionHeap region = maker.make(this, bytes);
            RegionHeap[] grown = Arrays.copyOf(regions, regions.length + 1);
            RegionPause[] grownPauses = Arrays.copyOf(pauses, pauses.length + 1);
            grown[regions.length] = region;
            grownPauses[pauses.length] = new RegionPause(region);
            pauses = grownPauses;
            regions = grown;
            return region;
        }
    }

    /**
     * Gives back every page of the tag, after the device has finished its work and (when the tag
     * keeps its contents) the live bytes were copied to pinned host memory. Nothing happens when it
     * is paused already.
     *
     * @throws TagTransitionException when a driver call failed partway; the tag is consistent
     */
    void pause(HostTransfers transfers, StreamEvents events, PinnedChunks pinned) {
        gate.writeLock().lock();
        try {
            if (pausedCompletely) return;
            long start = System.nanoTime();
            boolean keep = keepContents;
            long kept = 0;
            try {
                // Work queued on any stream may still read or write the tag's memory; unmap does not wait.
                events.synchronizeDevice();
                running = false;
                for (RegionPause p : pauses) kept += p.pause(keep, transfers, events, pinned);
            } catch (RuntimeException e) {
                running = allRunning();
                failures++;
                throw new TagTransitionException(name, "pause", running ? "still running" : "partly paused", e);
            }
            long took = System.nanoTime() - start;
            pauseCount++;
            pauseNanos += took;
            lastPauseNanos = took;
            keptBytes = kept;
            pausedCompletely = true;
        } finally {
            releasedNow = releasedBytes();
            gate.writeLock().unlock();
        }
    }

    /**
     * Backs the tag's ranges with memory again, at the same addresses, and copies kept contents
     * back; the pinned chunks go back to their pool for the next pause. Nothing
     * happens when the tag is running.
     *
     * @throws TagTransitionException when a driver call failed partway (out of memory, say); the tag is consistent
     */
    void resume(Runnable releaseCachedMemory) {
        gate.writeLock().lock();
        try {
            if (running) return;
            pausedCompletely = false;
            long start = System.nanoTime();
            try {
                for (RegionPause p : pauses) {
                    PinnedBackup done = p.resume(releaseCachedMemory);
                    if (done != null) done.giveBack();
                }
            } catch (RuntimeException e) {
                failures++;
                throw new TagTransitionException(name, "resume", "partly resumed", e);
            }
            running = true;
            long took = System.nanoTime() - start;
            resumeCount++;
            resumeNanos += took;
            lastResumeNanos = took;
        } finally {
            releasedNow = releasedBytes();
            gate.writeLock().unlock();
        }
    }

    boolean isRunning() {
        return running;
    }

    private boolean allRunning() {
        for (RegionPause p : pauses) if (!p.isRunning()) return false;
        return true;
    }

    /**
     * Releases what the tag's cached free pages hold, when it is running (a drain). With
     * {@code onlyIfIdle} (out-of-memory recovery of another allocation) it gives up at once when an
     * allocation or a pause of the tag is in progress, the caller's own included.
     */
    void releaseCachedMemory(boolean waitForFrees, boolean onlyIfIdle) {
        if (onlyIfIdle) {
            if (!gate.writeLock().tryLock()) return;
        } else {
            gate.writeLock().lock();
        }
        try {
            if (!running) return;
            for (RegionHeap r : regions) r.releaseCachedMemory(waitForFrees);
        } finally {
            gate.writeLock().unlock();
        }
    }

    /** Frees the copies of a paused tag and closes its regions. */
    void close() {
        gate.writeLock().lock();
        try {
            for (RegionPause p : pauses) p.close();
            for (RegionHeap r : regions) r.close();
            regions = new RegionHeap[0];
            pauses = new RegionPause[0];
        } finally {
            gate.writeLock().unlock();
        }
    }

    /** Gate's write lock held. */
    private long releasedBytes() {
        long sum = 0;
        for (RegionPause p : pauses) sum += p.releasedBytes();
        return sum;
    }

    /** Physical bytes the tag has given back now. */
    long pausedBytes() {
        return releasedNow;
    }

    TagStats.Tag stats() {
        long live = 0;
        for (RegionHeap r : regions) live += liveRequestedBytes(r);
        return new TagStats.Tag(name, keepContents, !running, live, releasedNow, pauseCount, resumeCount, pauseNanos,
                resumeNanos, lastPauseNanos, lastResumeNanos, keptBytes, failures);
    }

    private static long liveRequestedBytes(RegionHeap region) {
        region.lock.lock();
        try {
            long[] sum = {0};
            region.liveByAddress.forEachLong((address, id) -> sum[0] += region.blocks.requestedOrStream[(int) id]);
            return sum[0];
        } finally {
            region.lock.unlock();
        }
    }
}
