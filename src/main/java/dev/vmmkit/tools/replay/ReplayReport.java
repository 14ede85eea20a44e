package dev.vmmkit.tools.replay;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.annotation.JsonPropertyOrder;
import dev.vmmkit.core.AllocatorStats;
import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.tools.Percentiles;
import dev.vmmkit.trace.AllocationTrace;
import dev.vmmkit.trace.RecordedMemory;

/**
 * The figures of one replay, as written to {@code --json}. Sizes and counts come from the
 * allocator's {@link AllocatorStats}; {@code ops}, {@code allocs} and {@code frees} from the trace;
 * timings from the replayer.
 *
 * @param ops                 allocs plus frees replayed
 * @param peakLiveBytes       highest bytes requested by live allocations, as the allocator saw it
 * @param peakReservedBytes   highest physical memory the allocator held
 * @param fragmentationRatio  peak reserved over peak live (1.0 is perfect)
 * @param driverCalls         driver calls of the virtual memory API by kind
 * @param hitRate             share of allocations served without a driver call
 * @param allocNs             latency of {@code allocate}, in nanoseconds
 * @param freeNs              latency of {@code deallocate}, in nanoseconds
 * @param wallNsPerOp         wall time of the whole replay loop over {@code ops}
 * @param driverHandles       handles the driver calls touched, by kind (setAccess and unmap cost per handle)
 * @param modelledDriverUsPerOp GPU driver time per op priced by {@link DriverCostModel}: a model, not a measurement
 * @param recordedReservedPeakBytes for a PyTorch snapshot, the most bytes PyTorch's own allocator reserved (else null, left out)
 * @param recordedLivePeakBytes     for a PyTorch snapshot, its peak of live bytes (else null, left out)
 * @param traceTruncated            whether the trace began after the program had allocated, and those allocations
 *                                  started the replay ({@link AllocationTrace#allocationsBeforeTrace()}); null, left
 *                                  out, only in a report not yet {@link #describing} its trace
 * @param waitsGivenUp              the trace's allocations that gave up waiting for cudaFree's memory in the
 *                                  recorded program ({@link AllocationTrace#waitGaveUp}), which gave up in the
 *                                  replay too; null, left out, as {@code traceTruncated}
 */
@JsonPropertyOrder({"ops", "allocs", "frees", "peak_live_bytes", "peak_reserved_bytes", "fragmentation_ratio",
        "driver_calls", "hit_rate", "alloc_ns", "free_ns", "wall_ns_per_op", "driver_handles",
        "modelled_driver_us_per_op", "recorded_reserved_peak_bytes", "recorded_live_peak_bytes", "trace_truncated",
        "waits_given_up"})
public record ReplayReport(
        @JsonProperty("ops") long ops,
        @JsonProperty("allocs") long allocs,
        @JsonProperty("frees") long frees,
        @JsonProperty("peak_live_bytes") long peakLiveBytes,
        @JsonProperty("peak_reserved_bytes") long peakReservedBytes,
        @JsonProperty("fragmentation_ratio") double fragmentationRatio,
        @JsonProperty("driver_calls") DriverCalls driverCalls,
        @JsonProperty("hit_rate") double hitRate,
        @JsonProperty("alloc_ns") Latency allocNs,
        @JsonProperty("free_ns") Latency freeNs,
        @JsonProperty("wall_ns_per_op") double wallNsPerOp,
        @JsonProperty("driver_handles") DriverCalls driverHandles,
        @JsonProperty("modelled_driver_us_per_op") double modelledDriverUsPerOp,
        @JsonProperty("recorded_reserved_peak_bytes") @JsonInclude(JsonInclude.Include.NON_NULL) Long recordedReservedPeakBytes,
        @JsonProperty("recorded_live_peak_bytes") @JsonInclude(JsonInclude.Include.NON_NULL) Long recordedLivePeakBytes,
        @JsonProperty("trace_truncated") @JsonInclude(JsonInclude.Include.NON_NULL) Boolean traceTruncated,
        @JsonProperty("waits_given_up") @JsonInclude(JsonInclude.Include.NON_NULL) Integer waitsGivenUp) {

    /** A report without handle counts (a resource that does not count them). */
    public ReplayReport(long ops, long allocs, long frees, long peakLiveBytes, long peakReservedBytes,
                        double fragmentationRatio, DriverCalls driverCalls, double hitRate, Latency allocNs,
                        Latency freeNs, double wallNsPerOp) {
        this(ops, allocs, frees, peakLiveBytes, peakReservedBytes, fragmentationRatio, driverCalls, hitRate, allocNs,
                freeNs, wallNsPerOp, new DriverCalls(0, 0, 0, 0, 0, 0, 0), 0.0, null, null, null, null);
    }

    /** Builds the report of a replay of {@code allocs} allocations and {@code frees} frees. */
    public static ReplayReport of(long allocs, long frees, AllocatorStats stats,
                                  Latency allocNs, Latency freeNs, long wallNs) {
        long ops = allocs + frees;
        return new ReplayReport(ops, allocs, frees, stats.peakLiveBytes(), stats.peakReservedBytes(),
                stats.fragmentationRatio(), DriverCalls.of(stats), stats.hitRate(), allocNs, freeNs,
                ops == 0 ? 0.0 : (double) wallNs / ops, DriverCalls.handlesOf(stats),
                ops == 0 ? 0.0 : DriverCostModel.micros(stats.driverHandles()) / ops, null, null, null, null);
    }

    /**
     * This report with what the trace says of itself: whether it began after the program had
     * allocated, how many of its requests gave up waiting for cudaFree's memory, and for a PyTorch
     * snapshot what PyTorch's allocator held while it was recorded.
     */
    public ReplayReport describing(AllocationTrace trace) {
        RecordedMemory recorded = trace.recorded().orElse(null);
        return new ReplayReport(ops, allocs, frees, peakLiveBytes, peakReservedBytes, fragmentationRatio, driverCalls,
                hitRate, allocNs, freeNs, wallNsPerOp, driverHandles, modelledDriverUsPerOp,
                recorded == null ? null : recorded.reservedPeakBytes(), recorded == null ? null : recorded.livePeakBytes(),
                trace.allocationsBeforeTrace() > 0, trace.waitsGivenUp());
    }

    /** Counts of the virtual memory API's calls; event calls are left out. */
    @JsonPropertyOrder({"reserve", "create", "map", "set_access", "unmap", "release", "address_free"})
    public record DriverCalls(
            @JsonProperty("reserve") long reserve,
            @JsonProperty("create") long create,
            @JsonProperty("map") long map,
            @JsonProperty("set_access") long setAccess,
            @JsonProperty("unmap") long unmap,
            @JsonProperty("release") long release,
            @JsonProperty("address_free") long addressFree) {

        public static DriverCalls of(AllocatorStats stats) {
            return new DriverCalls(stats.driverCalls(DriverCall.RESERVE), stats.driverCalls(DriverCall.CREATE),
                    stats.driverCalls(DriverCall.MAP), stats.driverCalls(DriverCall.SET_ACCESS),
                    stats.driverCalls(DriverCall.UNMAP), stats.driverCalls(DriverCall.RELEASE),
                    stats.driverCalls(DriverCall.ADDRESS_FREE));
        }

        /** The handles those calls touched, by kind. */
        public static DriverCalls handlesOf(AllocatorStats stats) {
            var h = stats.driverHandles();
            return new DriverCalls(h.handles(DriverCall.RESERVE), h.handles(DriverCall.CREATE),
                    h.handles(DriverCall.MAP), h.handles(DriverCall.SET_ACCESS), h.handles(DriverCall.UNMAP),
                    h.handles(DriverCall.RELEASE), h.handles(DriverCall.ADDRESS_FREE));
        }

        /** All of them together. */
        public long total() {
            return reserve + create + map + setAccess + unmap + release + addressFree;
        }
    }

    /** Median and 99th percentile of a set of durations, by nearest rank; 0 for an empty set. */
    @JsonPropertyOrder({"p50", "p99"})
    public record Latency(@JsonProperty("p50") long p50, @JsonProperty("p99") long p99) {

        /** Percentiles of the first {@code count} entries of {@code samples}, which this sorts in place. */
        public static Latency of(long[] samples, int count) {
            Percentiles.sort(samples, count);
            return new Latency(Percentiles.nearestRank(samples, count, 0.50), Percentiles.nearestRank(samples, count, 0.99));
        }
    }
}
