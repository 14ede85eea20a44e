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

    private ReplaySummary() {
    }

    public static String format(String traceName, String driverName, ReplayReport r) {
        ReplayReport.DriverCalls calls = r.driverCalls();
        double callsPerOp = r.ops() == 0 ? 0.0 : (double) calls.total() / r.ops();
        return String.format(Locale.ROOT, "trace %s (%s driver): %,d ops (%,d allocs, %,d frees)%n", traceName, driverName,
                r.ops(), r.allocs(), r.frees())
                + String.format(Locale.ROOT, "peak live %s, peak reserved %s, fragmentation ratio %.3f%n",
                bytes(r.peakLiveBytes()), bytes(r.peakReservedBytes()), r.fragmentationRatio())
                + String.format(Locale.ROOT, "hit rate %.1f%%; driver calls: reserve %,d, create %,d, map %,d, "
                                + "set_access %,d, unmap %,d, release %,d, address_free %,d; per op %.3f%n",
                r.hitRate() * 100, calls.reserve(), calls.create(), calls.map(), calls.setAccess(), calls.unmap(),
                calls.release(), calls.addressFree(), callsPerOp)
                + String.format(Locale.ROOT, "alloc p50 %s p99 %s; free p50 %s p99 %s; wall %s/op%n",
                duration(r.allocNs().p50()), duration(r.allocNs().p99()),
                duration(r.freeNs().p50()), duration(r.freeNs().p99()), duration(r.wallNsPerOp()))
                + handles(r);
    }

    /** The handles line, when the resource counted them: what the GPU driver would charge for. */
    private static String handles(ReplayReport r) {
        ReplayReport.DriverCalls h = r.driverHandles();
        if (h.total() == 0) return "";
        return String.format(Locale.ROOT, "driver handles: create %,d, map %,d, set_access %,d, unmap %,d, release %,d; "
                        + "modelled GPU driver time %.2f us/op (a model: GPU-FACTS per-handle costs)%n",
                h.create(), h.map(), h.setAccess(), h.unmap(), h.release(), r.modelledDriverUsPerOp());
    }

    /** Bytes in the largest binary unit that keeps the figure at least 1, e.g. {@code 709.5 MiB}. */
    static String bytes(long bytes) {
        return ByteSize.formatOneDecimal(bytes);
    }

    /** Nanoseconds as {@code 95 ns}, {@code 1.2 us}, {@code 3.4 ms} or {@code 1.5 s}. */
    static String duration(double ns) {
        if (ns < 1_000) return String.format(Locale.ROOT, ns == Math.rint(ns) ? "%.0f ns" : "%.1f ns", ns);
        if (ns < 1_000_000) return String.format(Locale.ROOT, "%.2f us", ns / 1e3);
        if (ns < 1_000_000_000) return String.format(Locale.ROOT, "%.2f ms", ns / 1e6);
        return String.format(Locale.ROOT, "%.2f s", ns / 1e9);
    }
}
