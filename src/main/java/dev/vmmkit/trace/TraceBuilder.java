package dev.vmmkit.trace;

import org.agrona.collections.IntArrayList;
import org.agrona.collections.Long2LongHashMap;
import org.agrona.collections.LongHashSet;

import java.util.BitSet;

/**
 * Collects the requests of one trace into the primitive arrays of an {@link AllocationTrace}, and
 * keeps the figures the trace alone defines (peak live bytes, most live allocations). Both readers
 * ({@link TraceReader}, {@link SnapshotReader}) build through it; they decide what a request that
 * does not pair up means.
 *
 * <p>Allocations made before the trace began start it: a reader that knows them up front adds them
 * first ({@link #allocBeforeTrace}); one that finds them as the trace frees them
 * ({@link #freeBeforeTrace}) gets them put first when the trace is built. Until then the running
 * figures leave those found late out (live bytes may go below zero), and they are added at the end.
 */
final class TraceBuilder {
    /** Size of a key that is not live; real sizes are never negative. */
    static final long NOT_LIVE = -1;

    private final OpColumns ops = new OpColumns();
    /** Allocations made before the trace, found as it freed them; put first when it is built. */
    private final OpColumns foundBeforeTrace = new OpColumns();
    private long foundBeforeTraceBytes;
    private int allocs;
    private int covers;
    private int allocationsBeforeTrace;
    private long liveBytes;
    private long peakLiveBytes;
    private int liveAllocations;
    private int maxLiveAllocations;
    private final Long2LongHashMap liveSizes = new Long2LongHashMap(NOT_LIVE);
    /** Every key allocated or freed so far: a free of one that is not live is a second free. */
    private final LongHashSet named = new LongHashSet();
    /** Allocations (their index in {@link #ops}) that gave up waiting for cudaFrees' memory. */
    private final IntArrayList waitsGivenUp = new IntArrayList();

    /** Appends an alloc; false (and nothing appended) when {@code key} is already live. */
    boolean alloc(long key, long size, long stream, int lineNumber) {
        if (liveSizes.get(key) != NOT_LIVE) return false;
        liveSizes.put(key, size);
        named.add(key);
        liveBytes += size;
        peakLiveBytes = Math.max(peakLiveBytes, liveBytes);
        maxLiveAllocations = Math.max(maxLiveAllocations, ++liveAllocations);
        allocs++;
        ops.append(AllocationTrace.ALLOC, key, size, stream, lineNumber);
        return true;
    }

    /**
     * Appends an allocation the program made before the trace's first line (the trace frees it, or
     * it was still live at the end); false when {@code key} is already live. Call these before any
     * of the trace's own requests: such allocations start the replay.
     */
    boolean allocBeforeTrace(long key, long size, long stream) {
        if (ops.count() != allocationsBeforeTrace) throw new IllegalStateException("allocations before the trace come first");
        if (!alloc(key, size, stream, 0)) return false;
        allocationsBeforeTrace++;
        return true;
    }

    /** Appends the free of {@code key} and returns its size; {@link #NOT_LIVE} (nothing appended) when it is not live. */
    long free(long key, long stream, int lineNumber) {
        long size = liveSizes.remove(key);
        if (size == NOT_LIVE) return NOT_LIVE;
        liveBytes -= size;
        liveAllocations--;
        ops.append(AllocationTrace.FREE, key, size, stream, lineNumber);
        return size;
    }

    /**
     * Appends the free of {@code key}, which the trace never named: an allocation of {@code size} on
     * {@code stream} made before it began, which is put first. False (nothing appended) when the
     * trace named the key before: a second free.
     */
    boolean freeBeforeTrace(long key, long size, long stream, int lineNumber) {
        if (!named.add(key)) return false;
        // A cudaFree's allocation was a cudaMalloc, on the default stream.
        long allocStream = stream == AllocationTrace.DEVICE_WIDE_STREAM ? 0 : stream;
        foundBeforeTrace.append(AllocationTrace.ALLOC, key, size, allocStream, 0);
        foundBeforeTraceBytes += size;
        allocationsBeforeTrace++;
        allocs++;
        liveBytes -= size;
        liveAllocations--;
        ops.append(AllocationTrace.FREE, key, size, stream, lineNumber);
        return true;
    }

    /**
     * Appends the completion of a cudaFree appended before: the {@code ordinal}-th device-wide free
     * of the trace (from 0), of {@code key}, became reusable.
     */
    void cover(long key, int ordinal, int lineNumber) {
        covers++;
        ops.append(AllocationTrace.COVER, key, ordinal, AllocationTrace.DEVICE_WIDE_STREAM, lineNumber);
    }

    /**
     * Marks the allocation appended last, of {@code key}, as one that gave up waiting for memory
     * freed by cudaFree; false (nothing marked) when the last operation is not that allocation.
     */
    boolean waitGaveUp(long key) {
        int last = ops.count() - 1;
        if (last < 0 || ops.kind(last) != AllocationTrace.ALLOC || ops.key(last) != key) return false;
        if (waitsGivenUp.isEmpty() || waitsGivenUp.getInt(waitsGivenUp.size() - 1) != last) waitsGivenUp.addInt(last);
        return true;
    }

    /** Most bytes live at once, those made before the trace included. */
    long peakLiveBytes() {
        return foundBeforeTraceBytes + peakLiveBytes;
    }

    /** Operations appended so far. */
    int ops() {
        return ops.count();
    }

    AllocationTrace build(String name, RecordedMemory recorded) {
        OpColumns all = ops;
        if (foundBeforeTrace.count() > 0) {
            all = new OpColumns();
            all.appendAll(foundBeforeTrace);
            all.appendAll(ops);
        }
        BitSet gaveUp = new BitSet();
        for (int i = 0; i < waitsGivenUp.size(); i++) gaveUp.set(foundBeforeTrace.count() + waitsGivenUp.getInt(i));
        return all.toTrace(name, allocs, covers, foundBeforeTrace.count() + maxLiveAllocations, peakLiveBytes(),
                allocationsBeforeTrace, recorded, gaveUp);
    }
}
