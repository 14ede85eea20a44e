package dev.vmmkit.tools.report;

import dev.vmmkit.core.AllocatorStats;
import dev.vmmkit.core.BlockMap;
import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.tools.replay.ReplayListener;
import dev.vmmkit.tools.replay.ReplayTarget;

import java.util.Arrays;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;

/**
 * Samples a replay for the HTML report: live and reserved bytes and the driver calls so far, about
 * {@value #SAMPLES} times over the trace and exactly at its peak, where it also takes the
 * allocator's {@link BlockMap}. Used on a replay of its own, never on the measured one.
 */
public final class ReportSampler implements ReplayListener {
    static final int SAMPLES = 1500;
    /** The driver calls the report plots, in the virtual memory API's order. */
    static final List<DriverCall> CALLS = List.of(DriverCall.RESERVE, DriverCall.CREATE, DriverCall.MAP,
            DriverCall.SET_ACCESS, DriverCall.UNMAP, DriverCall.RELEASE);

    private final int ops;
    private final int every;
    private final int peakOp;
    private int count;
    private int[] opAt = new int[SAMPLES + 8];
    private long[] live = new long[SAMPLES + 8];
    private long[] reserved = new long[SAMPLES + 8];
    private final long[] recordedReservedAtOp;
    private long[] recordedReserved = new long[SAMPLES + 8];
    private final Map<DriverCall, long[]> calls = new EnumMap<>(DriverCall.class);
    private BlockMap peakMap = new BlockMap(List.of());

    /** Samples a replay of {@code ops} operations whose peak live bytes come after operation {@code peakOp}. */
    public ReportSampler(int ops, int peakOp) {
        this(ops, peakOp, null);
    }

    /**
     * Also samples {@code recordedReservedAtOp}, what the recording allocator (PyTorch's) reserved
     * at each operation, beside the replay's own reserved bytes; null when the trace has none.
     */
    public ReportSampler(int ops, int peakOp, long[] recordedReservedAtOp) {
        this.recordedReservedAtOp = recordedReservedAtOp;
        this.ops = ops;
        this.every = Math.max(1, ops / SAMPLES);
        this.peakOp = peakOp;
        for (DriverCall call : CALLS) calls.put(call, new long[opAt.length]);
    }

    @Override
    public int first() {
        return ops == 0 ? -1 : 0;
    }

    @Override
    public int afterOp(int op, ReplayTarget target) {
        sample(op, target.stats());
        if (op == peakOp) peakMap = target.blockMap();
        int next = (op / every + 1) * every;
        if (op < peakOp && peakOp < next) next = peakOp;
        if (next >= ops - 1 && op < ops - 1) next = ops - 1;
        return op >= ops - 1 ? -1 : next;
    }

    private void sample(int op, AllocatorStats stats) {
        if (count == opAt.length) grow();
        opAt[count] = op + 1; // operations done
        live[count] = stats.liveBytes();
        reserved[count] = stats.reservedBytes();
        if (recordedReservedAtOp != null) recordedReserved[count] = recordedReservedAtOp[op];
        for (DriverCall call : CALLS) calls.get(call)[count] = stats.driverCalls(call);
        count++;
    }

    private void grow() {
        int n = opAt.length * 2;
        opAt = Arrays.copyOf(opAt, n);
        live = Arrays.copyOf(live, n);
        reserved = Arrays.copyOf(reserved, n);
        recordedReserved = Arrays.copyOf(recordedReserved, n);
        calls.replaceAll((call, values) -> Arrays.copyOf(values, n));
    }

    /** The samples taken. */
    public Timeline timeline() {
        Map<String, long[]> byCall = new java.util.LinkedHashMap<>();
        for (DriverCall call : CALLS) byCall.put(call.key(), Arrays.copyOf(calls.get(call), count));
        return new Timeline(Arrays.copyOf(opAt, count), Arrays.copyOf(live, count), Arrays.copyOf(reserved, count),
                recordedReservedAtOp == null ? null : Arrays.copyOf(recordedReserved, count), byCall);
    }

    /** The allocator's blocks right after the peak operation (empty before it was reached). */
    public BlockMap peakBlockMap() {
        return peakMap;
    }

    /**
     * The sampled series, index by index.
     *
     * @param ops           operations done at each sample
     * @param liveBytes     bytes requested by live allocations
     * @param reservedBytes physical memory the allocator held
     * @param recordedReservedBytes what the recording allocator (PyTorch's) reserved then; null when unknown
     * @param driverCalls   driver calls made so far, by call name
     */
    public record Timeline(int[] ops, long[] liveBytes, long[] reservedBytes, long[] recordedReservedBytes,
                           Map<String, long[]> driverCalls) {
    }
}
