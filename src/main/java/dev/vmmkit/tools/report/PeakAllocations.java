package dev.vmmkit.tools.report;

import dev.vmmkit.trace.AllocationTrace;
import org.agrona.collections.Long2LongHashMap;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * The moment of a trace's peak live bytes and what was alive then, read from the trace alone.
 *
 * @param peakOp  the operation (0-based) after which live bytes first reach their peak; -1 for a trace without allocations
 * @param largest the largest allocations alive at that moment, largest first
 */
public record PeakAllocations(int peakOp, List<Allocation> largest) {

    /**
     * One allocation alive at the peak.
     *
     * @param size   bytes requested
     * @param op     the operation that allocated it (0-based)
     * @param line   its line in the trace file
     * @param stream its stream
     */
    public record Allocation(long size, int op, int line, long stream) {
    }

    /** Finds the peak of {@code trace} and its {@code count} largest live allocations. */
    public static PeakAllocations of(AllocationTrace trace, int count) {
        int peakOp = peakOp(trace);
        if (peakOp < 0) return new PeakAllocations(-1, List.of());
        Long2LongHashMap opOfKey = new Long2LongHashMap(-1);
        for (int op = 0; op <= peakOp; op++) {
            if (trace.kind(op) == AllocationTrace.ALLOC) opOfKey.put(trace.key(op), op);
            else if (trace.kind(op) == AllocationTrace.FREE) opOfKey.remove(trace.key(op));
        }
        List<Allocation> alive = new ArrayList<>();
        opOfKey.forEachLong((key, op) -> alive.add(new Allocation(trace.size((int) op), (int) op,
                trace.lineNumber((int) op), trace.stream((int) op))));
        alive.sort(Comparator.comparingLong(Allocation::size).reversed().thenComparingInt(Allocation::op));
        return new PeakAllocations(peakOp, List.copyOf(alive.subList(0, Math.min(count, alive.size()))));
    }

    private static int peakOp(AllocationTrace trace) {
        long live = 0;
        for (int op = 0; op < trace.ops(); op++) {
            if (trace.kind(op) == AllocationTrace.COVER) continue;
            live += trace.kind(op) == AllocationTrace.ALLOC ? trace.size(op) : -trace.size(op);
            if (live == trace.peakLiveBytes() && trace.kind(op) == AllocationTrace.ALLOC) return op;
        }
        return -1;
    }
}
