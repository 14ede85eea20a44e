package dev.vmmkit.tools.replay;

import dev.vmmkit.core.AllocatorStats;
import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.core.ReplayedCovers;
import dev.vmmkit.trace.AllocationTrace;
import org.agrona.collections.Long2LongHashMap;

/**
 * Replays one {@link AllocationTrace} through a {@link DeviceMemoryResource}, in file order, and
 * measures it: each allocate and each deallocate is timed with {@link System#nanoTime()} (so a
 * figure includes one clock read, ~20 ns on Linux), and the whole loop is timed for the wall time
 * per op.
 *
 * <p>Everything the loop needs (the timing arrays and the key-to-address map, sized for the trace's
 * most live allocations) is made in the constructor, so the loop allocates nothing and a replayer
 * can replay its trace many times (warm-up runs, then the measured run).
 *
 * <p>Each op's stream is the target's stand-in for the recorded one ({@link ReplayTarget#streams}).
 * A cudaFree ({@link AllocationTrace#DEVICE_WIDE_STREAM}) is marked right after it is made, and its
 * completion ({@link AllocationTrace#COVER}) covers it then ({@link ReplayTarget#replayedCovers}),
 * outside the timed calls: no device work ran in the replay, the trace says when the program's did.
 * An allocation that gave up waiting for such memory in the program ({@link AllocationTrace#waitGaveUp})
 * gives up here too.
 *
 * <p>Allocations still live at the end of the trace are left to the target, which frees them when
 * closed. Not thread-safe: one replay at a time.
 */
public final class Replayer {
    /** Address of a key that is not live; no allocator returns it. */
    private static final long NO_ADDRESS = Long.MIN_VALUE;
    private static final float MAP_LOAD_FACTOR = 0.6f;

    private final AllocationTrace trace;
    private final long[] allocNs;
    private final long[] freeNs;
    private final Long2LongHashMap addressOfKey;
    /** The trace's distinct streams, in order of first use, and each op's index into them. */
    private final long[] recordedStreams;
    private final int[] streamSlot;

    public Replayer(AllocationTrace trace) {
        this.trace = trace;
        this.allocNs = new long[trace.allocs()];
        this.freeNs = new long[trace.frees()];
        int capacity = (int) Math.min(1 << 30, (long) Math.ceil(trace.maxLiveAllocations() / MAP_LOAD_FACTOR) + 1);
        this.addressOfKey = new Long2LongHashMap(capacity, MAP_LOAD_FACTOR, NO_ADDRESS);
        this.streamSlot = new int[trace.ops()];
        Long2LongHashMap slotOfStream = new Long2LongHashMap(-1);
        for (int op = 0; op < trace.ops(); op++) {
            long slot = slotOfStream.get(trace.stream(op));
            if (slot < 0) {
                slot = slotOfStream.size();
                slotOfStream.put(trace.stream(op), slot);
            }
            streamSlot[op] = (int) slot;
        }
        this.recordedStreams = new long[slotOfStream.size()];
        slotOfStream.forEachLong((stream, slot) -> recordedStreams[(int) slot] = stream);
    }

    /** Replays the trace through {@code target} and reports the figures. */
    public ReplayReport replay(ReplayTarget target) {
        return replay(target, null);
    }

    /**
     * Replays the trace through {@code target}; with a {@code check}, also stamps every allocation
     * and checks it before its free (this is outside the timed calls but inside the wall time).
     *
     * @throws ReplayException when the resource fails a request or the check finds changed bytes
     */
    public ReplayReport replay(ReplayTarget target, PatternCheck check) {
        return replay(target, check, null);
    }

    /**
     * As {@link #replay(ReplayTarget, PatternCheck)}, telling {@code listener} (may be null) after the
     * operations it asks for; it runs between operations, outside the timed calls.
     */
    public ReplayReport replay(ReplayTarget target, PatternCheck check, ReplayListener listener) {
        DeviceMemoryResource resource = target.resource();
        ReplayedCovers covers = target.replayedCovers();
        long[] streams = target.streams(recordedStreams);
        addressOfKey.clear();
        int allocs = 0;
        int frees = 0;
        int nextCall = listener == null ? -1 : listener.first();
        long start = System.nanoTime();
        for (int op = 0, ops = trace.ops(); op < ops; op++) {
            long key = trace.key(op);
            long size = trace.size(op);
            long stream = streams[streamSlot[op]];
            byte kind = trace.kind(op);
            if (kind == AllocationTrace.COVER) {
                if (covers != null) covers.coverThrough(trace.coveredFree(op));
            } else if (kind == AllocationTrace.ALLOC) {
                boolean givesUp = covers != null && trace.waitGaveUp(op);
                if (givesUp) covers.giveUpWaits(true);
                long before = System.nanoTime();
                long address;
                try {
                    address = resource.allocate(size, stream);
                } catch (RuntimeException e) {
                    throw failure(op, "alloc of " + size + " bytes failed", e);
                }
                allocNs[allocs++] = System.nanoTime() - before;
                if (givesUp) covers.giveUpWaits(false);
                addressOfKey.put(key, address);
                if (check != null) check.stamp(key, address, size);
            } else {
                long address = addressOfKey.remove(key);
                if (check != null) verify(check, op, key, address, size);
                long before = System.nanoTime();
                try {
                    resource.deallocate(address, stream);
                } catch (RuntimeException e) {
                    throw failure(op, String.format("free of 0x%x (%d bytes) failed", address, size), e);
                }
                freeNs[frees++] = System.nanoTime() - before;
                if (covers != null && stream == DeviceMemoryResource.DEVICE_WIDE_STREAM) covers.markAfterFree();
            }
            if (op == nextCall) nextCall = listener.afterOp(op, target);
        }
        long wallNs = System.nanoTime() - start;
        AllocatorStats stats = target.stats();
        return ReplayReport.of(allocs, frees, stats,
                ReplayReport.Latency.of(allocNs, allocs), ReplayReport.Latency.of(freeNs, frees), wallNs);
    }

    private void verify(PatternCheck check, int op, long key, long address, long size) {
        long offset = check.firstDifference(key, address, size);
        if (offset >= 0) {
            throw new ReplayException(String.format(
                    "%s:%d: verify failed: allocation of key %s at 0x%x (%d bytes) changed at byte %d while live"
                            + " (memory shared with another allocation?)",
                    trace.name(), trace.lineNumber(op), Long.toUnsignedString(key), address, size, offset));
        }
    }

    private ReplayException failure(int op, String what, RuntimeException cause) {
        return new ReplayException(trace.name() + ":" + trace.lineNumber(op) + ": " + what
                + " (key " + Long.toUnsignedString(trace.key(op)) + "): " + cause.getMessage(), cause);
    }
}
