package dev.vmmkit.tools.replay;

import dev.vmmkit.core.ByteSize;

import java.util.Locale;

/**
 * The readable summary of a replay printed on stdout, e.g.
 * <pre>
 * trace bert_infer.csv.gz (host driver): 29,722 ops (14,862 allocs, 14,860 frees)
 * peak live 709.5 MiB, peak reserved 731.0 MiB, fragmentation ratio 1.030
 * hit rate 98.8%; driver calls: reserve 2, create 361, ...; per op 0.030
 * alloc p50 95 ns p99 1.2 us; free p50 80 ns p99 0.9 us; wall 0.21 us/op
 * </pre>
 */
public final class ReplaySummary {

    /** A figure that a replay without the operations it needs (e.g. an empty trace) does not define. */
    public static final String NOT_APPLICABLE = "n/a";

    private ReplaySummary() {
    }

    public static String format(String traceName, String driverName, ReplayReport r) {
        ReplayReport.DriverCalls calls = r.driverCalls();
        return String.format(Locale.ROOT, "trace %s (%s driver): %,d ops (%,d allocs, %,d frees)%n", traceName, driverName,
                r.ops(), r.allocs(), r.frees())
                + String.format(Locale.ROOT, "peak live %s, peak reserved %s, fragmentation ratio %s%n",
                bytes(r.peakLiveBytes()), bytes(r.peakReservedBytes()), fragmentationRatio(r))
                + String.format(Locale.ROOT, "hit rate %s; driver calls: %s; per op %s%n",
                hitRate(r), driverCalls(calls), callsPerOp(r))
                + String.format(Locale.ROOT, "alloc p50 %s p99 %s; free p50 %s p99 %s; wall %s/op%n",
                p50(r.allocNs(), r.allocs()), p99(r.allocNs(), r.allocs()),
                p50(r.freeNs(), r.frees()), p99(r.freeNs(), r.frees()), wallPerOp(r))
                + handles(r)
                + (r.recordedReservedPeakBytes() == null ? "" : comparedWithPyTorch(r) + System.lineSeparator())
                + (Boolean.TRUE.equals(r.traceTruncated()) ? "the trace began after the program had allocated: the allocations"
                + " made before it (those it frees without allocating them) started the replay" + System.lineSeparator() : "")
                + (r.waitsGivenUp() != null && r.waitsGivenUp() > 0 ? String.format(Locale.ROOT,
                "allocations that gave up waiting for cudaFree's memory (wait_gave_up), in the program and in the replay: %,d%n",
                r.waitsGivenUp()) : "");
    }

    /**
     * One sentence comparing vmmkit's peak reserved bytes with what PyTorch's allocator reserved while
     * the snapshot was recorded, e.g. {@code PyTorch reserved 812.0 MiB at most (its live peak 709.5
     * MiB); vmmkit would reserve 78.0 MiB less (9.6%).}
     */
    public static String comparedWithPyTorch(ReplayReport r) {
        long pytorch = r.recordedReservedPeakBytes();
        long difference = pytorch - r.peakReservedBytes();
        String verdict;
        if (difference == 0) verdict = "vmmkit would reserve the same";
        else verdict = String.format(Locale.ROOT, "vmmkit would reserve %s %s (%.1f%%)", bytes(Math.abs(difference)),
                difference > 0 ? "less" : "more", pytorch == 0 ? 100.0 : 100.0 * Math.abs(difference) / pytorch);
        return String.format(Locale.ROOT, "PyTorch reserved %s at most (its live peak %s); %s.", bytes(pytorch),
                bytes(r.recordedLivePeakBytes()), verdict);
    }

    /** The handles line, when the resource counted them: what the GPU driver would charge for. */
    private static String handles(ReplayReport r) {
        ReplayReport.DriverCalls h = r.driverHandles();
        if (h.total() == 0) return "";
        return String.format(Locale.ROOT, "driver handles: create %,d, map %,d, set_access %,d, unmap %,d, release %,d; "
                        + "modelled GPU driver time %.2f us/op (a model: GPU-FACTS per-handle costs)%n",
                h.create(), h.map(), h.setAccess(), h.unmap(), h.release(), r.modelledDriverUsPerOp());
    }

    // Each figure as the summary prints it; n/a where the replay has none of the operations it needs.

    public static String fragmentationRatio(ReplayReport r) {
        return r.peakLiveBytes() > 0 ? String.format(Locale.ROOT, "%.3f", r.fragmentationRatio()) : NOT_APPLICABLE;
    }

    public static String hitRate(ReplayReport r) {
        return r.allocs() > 0 ? String.format(Locale.ROOT, "%.1f%%", r.hitRate() * 100) : NOT_APPLICABLE;
    }

    public static String driverCalls(ReplayReport.DriverCalls c) {
        return String.format(Locale.ROOT, "reserve %,d, create %,d, map %,d, set_access %,d, unmap %,d, release %,d, address_free %,d",
                c.reserve(), c.create(), c.map(), c.setAccess(), c.unmap(), c.release(), c.addressFree());
    }

    public static String callsPerOp(ReplayReport r) {
        return r.ops() > 0 ? String.format(Locale.ROOT, "%.3f", (double) r.driverCalls().total() / r.ops()) : NOT_APPLICABLE;
    }

    public static String p50(ReplayReport.Latency latency, long calls) {
        return calls > 0 ? duration(latency.p50()) : NOT_APPLICABLE;
    }

    public static String p99(ReplayReport.Latency latency, long calls) {
        return calls > 0 ? duration(latency.p99()) : NOT_APPLICABLE;
    }

    public static String wallPerOp(ReplayReport r) {
        return r.ops() > 0 ? duration(r.wallNsPerOp()) : NOT_APPLICABLE;
    }

    /** Bytes in the largest binary unit that keeps the figure at least 1, e.g. {@code 709.5 MiB}. */
    public static String bytes(long bytes) {
        return ByteSize.formatOneDecimal(bytes);
    }

    /** Nanoseconds as {@code 95 ns}, {@code 1.2 us}, {@code 3.4 ms} or {@code 1.5 s}. */
    public static String duration(double ns) {
        if (ns < 1_000) return String.format(Locale.ROOT, ns == Math.rint(ns) ? "%.0f ns" : "%.1f ns", ns);
        if (ns < 1_000_000) return String.format(Locale.ROOT, "%.2f us", ns / 1e3);
        if (ns < 1_000_000_000) return String.format(Locale.ROOT, "%.2f ms", ns / 1e6);
        return String.format(Locale.ROOT, "%.2f s", ns / 1e9);
    }
}
