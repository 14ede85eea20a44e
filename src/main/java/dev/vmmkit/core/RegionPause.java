package dev.vmmkit.core;

import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.HostTransfers;
import dev.vmmkit.driver.StreamEvents;
import org.agrona.collections.LongArrayList;

/**
 * Pausing one region of a tag: its physical memory given back, its address range kept, and back.
 *
 * <p>A pause unmaps each run of mapped pages and releases its handles, cached free pages included
 * ({@link PausePlan} says which runs and which bytes). When the tag keeps its contents, it first
 * queues copies of the live blocks' bytes to pinned host memory ({@link PinnedBackup}), and each
 * handle is a run of its own, unmapped and released as soon as the copies from it have landed while
 * the later ones still run (see {@link HandleSupply#KEPT_TAG_HANDLE_BYTES} for why). The blocks stay
 * as they are (live blocks stay live, so their frees work while paused); only the page table forgets
 * the pages. A resume backs each released run with one new handle (runs with kept bytes first cut
 * into runs of at most {@link HandleSupply#KEPT_TAG_HANDLE_BYTES}), maps it, grants access and
 * copies the kept bytes back: the same addresses, as few handles as before or fewer.
 *
 * <p>Each run is in one of three states: mapped (as the allocator left it), released, or mapped
 * again by a resume whose copies have not all landed (and, if its grant failed beyond undoing,
 * whose access has not been granted). A failure partway leaves every run in one of them, with
 * bookkeeping equal to the driver's state: a pause or a resume called again picks up where it
 * stopped. The caller (the tag) lets no allocation into the region meanwhile.
 */
final class RegionPause {
    private final RegionHeap region;
    /** Runs whose handles were released, as (address, bytes) pairs. */
    private final LongArrayList released = new LongArrayList();
    /** Runs mapped again by a resume whose contents were not copied back yet. */
    private final LongArrayList remapped = new LongArrayList();
    /**
     * The runs of {@link #remapped} mapped without access: their grant failed, and so did the unmap
     * that should have undone their map. The next resume grants them before it copies into them.
     */
    private final LongArrayList ungranted = new LongArrayList();
    /** Unmapped handles the driver refused to release, released again by the next pause or resume. */
    private final HandleRun unreleased = new HandleRun();
    private PinnedBackup backup;

    RegionPause(RegionHeap region) {
        this.region = region;
    }

    /** True when every run is mapped as the allocator left it (the region may serve requests). */
    boolean isRunning() {
        return released.isEmpty() && remapped.isEmpty();
    }

    /** The bytes of the runs released now. */
    long releasedBytes() {
        long sum = 0;
        for (int i = 1; i < released.size(); i += 2) sum += released.getLong(i);
        return sum;
    }

    /**
     * Releases every mapped page of the region, copying the live blocks' bytes first when
     * {@code keep}. Returns the bytes copied. Work on the device that may touch the region must have
     * completed. On failure the runs released so far stay released (with their copies) and the
     * others stay mapped; the failure is thrown.
     */
    long pause(boolean keep, HostTransfers transfers, StreamEvents events, PinnedChunks pinned) {
        LongArrayList runs = new LongArrayList();
        LongArrayList spans = new LongArrayList();
        region.lock.lock();
        try {
            region.inFlight.awaitNone();
            region.aliases.unmapRetiredAliases();
            PausePlan plan = new PausePlan(region, remapped);
            region.pages.forEachMappedRun((va, size) -> plan.addRuns(va, size, keep, runs));
            if (keep) plan.keptSpans(spans);
            region.inFlight.begin();
        } finally {
            region.lock.unlock();
        }
        try {
            releaseUnreleased();
            // Runs a failed resume mapped hold nothing copied back yet: their bytes are in the backup.
            while (!remapped.isEmpty()) {
                unmapAndRelease(remapped.getLong(0), remapped.getLong(1));
                removePair(ungranted, remapped.getLong(0));
                moveFirstPair(remapped, released);
            }
            long kept = 0;
            PinnedBackup.Outgoing copies = null;
            if (!spans.isEmpty()) {
                if (backup == null) backup = new PinnedBackup(transfers, events, pinned);
                long before = backup.bytes();
                copies = backup.copyOut(spans);
                kept = backup.bytes() - before;
            }
            for (int i = 0; i < runs.size(); i += 2) {
                long va = runs.getLong(i);
                long size = runs.getLong(i + 1);
                try {
                    if (copies != null) copies.awaitBelow(va + size);
                    unmapAndRelease(va, size);
                } catch (RuntimeException e) {
                    // This run and the later ones stay mapped: their bytes are on the device, not in the copy.
                    if (backup != null) {
                        for (int j = i; j < runs.size(); j += 2) backup.dropPiecesIn(runs.getLong(j), runs.getLong(j) + runs.getLong(j + 1));
                    }
                    if (copies != null) copies.abandon(e);
                    throw e;
                }
                released.addLong(va);
                released.addLong(size);
            }
            if (copies != null) {
                try {
                    copies.finish(); // every copy landed already: each run awaited its own
                } catch (RuntimeException e) {
                    copies.abandon(e);
                    throw e;
                }
            }
            return kept;
        } finally {
            endInFlight();
        }
    }

    /**
     * Backs every released run with one new handle (runs with kept bytes first cut into runs of at
     * most {@link HandleSupply#KEPT_TAG_HANDLE_BYTES}, so that the next pause can release them as
     * their copies land), maps it with access, and queues the copies of its kept bytes back before
     * the next run is mapped; when the device has no memory for a handle, {@code releaseCachedMemory} gives back what the
     * allocator caches and the handle is tried once more. Returns the backup whose bytes are home
     * again (its chunks for the caller to give back), or null when there was none. On failure the
     * runs mapped so far wait for their copies, the others stay released; the failure is thrown.
     */
    PinnedBackup resume(Runnable releaseCachedMemory) {
        region.lock.lock();
        try {
            region.inFlight.begin();
        } finally {
            region.lock.unlock();
        }
        PinnedBackup.Restore restore = backup == null ? null : backup.restore();
        try {
            releaseUnreleased();
            while (!ungranted.isEmpty()) {
                region.pages.grantAccess(ungranted.getLong(0), ungranted.getLong(1));
                ungranted.removeAt(0);
                ungranted.removeAt(0);
            }
            // Runs a failed resume mapped wait for their copies; each run mapped now gets its copies
            // at once, so they run while the next run is mapped.
            if (restore != null) {
                for (int i = 0; i < remapped.size(); i += 2) restore.copyInto(remapped.getLong(i), remapped.getLong(i + 1));
            }
            while (!released.isEmpty()) {
                if (restore != null) splitFirstPair(released, region.handles.tagHandleBytes(released.getLong(1), true));
                long va = released.getLong(0);
                long size = released.getLong(1);
                mapAgain(va, size, releaseCachedMemory);
                moveFirstPair(released, remapped);
                if (restore != null) restore.copyInto(va, size);
            }
            if (restore != null) restore.finish();
            remapped.clear();
            PinnedBackup done = backup;
            backup = null;
            return done;
        } catch (RuntimeException e) {
            if (restore != null) restore.abandon(e);
            throw e;
        } finally {
            endInFlight();
        }
    }

    /**
     * The bytes a pause would copy now when the tag keeps its contents: the live blocks, with the
     * gaps merged between them (what {@link #pause} copies). Allocations into the region may run
     * meanwhile; the caller holds off pauses and resumes.
     */
    long bytesToKeep() {
        LongArrayList spans = new LongArrayList();
        region.lock.lock();
        try {
            new PausePlan(region, remapped).liveSpans(spans);
        } finally {
            region.lock.unlock();
        }
        long sum = 0;
        for (int i = 1; i < spans.size(); i += 2) sum += spans.getLong(i);
        return sum;
    }

    /** Frees what a paused region holds off the device (the region closes). */
    void close() {
        try {
            releaseUnreleased();
        } catch (RuntimeException ignored) {
            // closing anyway
        }
        if (backup != null) {
            backup.giveBack();
            backup = null;
        }
        released.clear();
        remapped.clear();
        ungranted.clear();
    }

    private void mapAgain(long va, long size, Runnable releaseCachedMemory) {
        long handle;
        try {
            handle = region.driver.create(size, region.handles.exportable());
        } catch (DriverException e) {
            if (!e.isOutOfMemory()) throw e;
            // Memory other allocations freed may still be cached, mapped: give it back, then try once more.
            releaseCachedMemory.run();
            handle = region.driver.create(size, region.handles.exportable());
        }
        region.accounting.physicalCreated(size);
        HandleRun run = new HandleRun();
        run.add(handle, size);
        try {
            region.pages.mapRun(va, run);
        } catch (RuntimeException e) {
            if (region.pages.isMapped(va)) {
                // The grant failed and so did the unmap undoing the map: the run stays mapped, as
                // the page table says, without access.
                ungranted.addLong(va);
                ungranted.addLong(size);
                moveFirstPair(released, remapped);
            } else {
                release(handle, size);
            }
            throw e;
        }
    }

    private void unmapAndRelease(long va, long size) {
        HandleRun handles = new HandleRun();
        region.pages.unmapRange(va, va + size, handles); // nothing changes if the unmap fails
        for (int i = 0; i < handles.count(); i++) release(handles.handle(i), handles.bytes(i));
    }

    private void release(long handle, long bytes) {
        try {
            region.driver.release(handle);
            region.accounting.physicalReleased(bytes);
        } catch (DriverException e) {
            unreleased.add(handle, bytes);
        }
    }

    private void releaseUnreleased() {
        HandleRun left = new HandleRun();
        for (int i = 0; i < unreleased.count(); i++) {
            try {
                region.driver.release(unreleased.handle(i));
                region.accounting.physicalReleased(unreleased.bytes(i));
            } catch (DriverException e) {
                left.add(unreleased.handle(i), unreleased.bytes(i));
            }
        }
        unreleased.clear();
        for (int i = 0; i < left.count(); i++) unreleased.add(left.handle(i), left.bytes(i));
    }

    private void endInFlight() {
        region.lock.lock();
        try {
            region.inFlight.end();
        } finally {
            region.lock.unlock();
        }
    }

    /** Cuts the first pair of {@code pairs} after {@code bytes}, when it is longer. */
    private static void splitFirstPair(LongArrayList pairs, long bytes) {
        long va = pairs.getLong(0);
        long size = pairs.getLong(1);
        if (size <= bytes) return;
        pairs.setLong(1, bytes);
        pairs.addLong(2, va + bytes);
        pairs.addLong(3, size - bytes);
    }

    /** Removes the pair starting at {@code va} from {@code pairs}, if there is one. */
    private static void removePair(LongArrayList pairs, long va) {
        for (int i = 0; i < pairs.size(); i += 2) {
            if (pairs.getLong(i) == va) {
                pairs.removeAt(i);
                pairs.removeAt(i);
                return;
            }
        }
    }

    private static void moveFirstPair(LongArrayList from, LongArrayList to) {
        to.addLong(from.getLong(0));
        to.addLong(from.getLong(1));
        from.removeAt(0);
        from.removeAt(0);
    }
}
