package dev.vmmkit.trace;

import org.agrona.collections.Long2LongHashMap;


/**
 * Collects the requests of one trace into the primitive arrays of an {@link AllocationTrace}, and
 * keeps the figures the trace alone defines (peak live bytes, most live allocations). Both readers
 * ({@link TraceReader}, {@link SnapshotReader}) build through it; they decide what a request that
 * does not pair up means.
 */
final class TraceBuilder {
    /** Size of a key that is not live; real sizes are never negative. */
    static final long NOT_LIVE = -1;

    private final OpColumns ops = new OpColumns();
    private int allocs;
    private long liveBytes;
    private long peakLiveBytes;
    private int maxLiveAllocations;
    private int allocationsBeforeTrace;
    private final Long2LongHashMap liveSizes = new Long2LongHashMap(NOT_LIVE);

    /** Appends an alloc; false (and nothing appended) when {@code key} is already live. */
    boolean alloc(long key, long size, long stream, int lineNumber) {
        if (liveSizes.get(key) != NOT_LIVE) return false;
        liveSizes.put(key, size);
        liveBytes += size;
        peakLiveBytes = Math.max(peakLiveBytes, liveBytes);
        maxLiveAllocations = Math.max(maxLiveAllocations, liveSizes.size());
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
        ops.append(AllocationTrace.FREE, key, size, stream, lineNumber);
        return size;
    }

    long peakLiveBytes() {
        return peakLiveBytes;
    }

    /** Operations appended so far. */
    int ops() {
        return ops.count();
    }

    AllocationTrace build(String name, RecordedMemory recorded) {
        return ops.toTrace(name, allocs, maxLiveAllocations, peakLiveBytes, allocationsBeforeTrace, recorded);
    }
}
