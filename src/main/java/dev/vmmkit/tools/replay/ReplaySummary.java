package dev.vmmkit.tools.replay;

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
    static final String NOT_APPLICABLE = "n/a";

    private ReplaySummary() {
    }

    public static String format(String traceName, String driverName, ReplayReport r) {
        ReplayReport.DriverCalls calls = r.driverCalls();
        boolean anyAlloc = r.allocs() > 0;
        boolean anyFree = r.frees() > 0;
        return String.format(Locale.ROOT, "trace %s (%s driver): %,d ops (%,d allocs, %,d frees)%n", traceName, driverName,
                r.ops(), r.allocs(), r.frees())
                + String.format(Locale.ROOT, "peak live %s, peak reserved %s, fragmentation ratio %s%n",
                bytes(r.peakLiveBytes()), bytes(r.peakReservedBytes()),
                r.peakLiveBytes() > 0 ? String.format(Locale.ROOT, "%.3f", r.fragmentationRatio()) : NOT_APPLICABLE)
                + String.format(Locale.ROOT, "hit rate %s; driver calls: reserve %,d, create %,d, map %,d, "
                                + "set_access %,d, unmap %,d, release %,d, address_free %,d; per op %s%n",
                anyAlloc ? String.format(Locale.ROOT, "%.1f%%", r.hitRate() * 100) : NOT_APPLICABLE,
                calls.reserve(), calls.create(), calls.map(), calls.setAccess(), calls.unmap(),
                calls.release(), calls.addressFree(),
                r.ops() > 0 ? String.format(Locale.ROOT, "%.3f", (double) calls.total() / r.ops()) : NOT_APPLICABLE)
                + String.format(Locale.ROOT, "alloc p50 %s p99 %s; free p50 %s p99 %s; wall %s/op%n",
                anyAlloc ? duration(r.allocNs().p50()) : NOT_APPLICABLE, anyAlloc ? duration(r.allocNs().p99()) : NOT_APPLICABLE,
                anyFree ? duration(r.freeNs().p50()) : NOT_APPLICABLE, anyFree ? duration(r.freeNs().p99()) : NOT_APPLICABLE,
                r.ops() > 0 ? duration(r.wallNsPerOp()) : NOT_APPLICABLE);
    }

    /** Bytes in the largest binary unit that keeps the figure at least 1, e.g. {@code 709.5 MiB}. */
    static String bytes(long bytes) {
        String[] units = {"KiB", "MiB", "GiB", "TiB"};
        if (bytes < 1024) return bytes + " B";
        double value = bytes;
        int unit = -1;
        while (value >= 1024 && unit < units.length - 1) {
            value /= 1024;
            unit++;
        }
        return String.format(Locale.ROOT, "%.1f %s", value, units[unit]);
    }

    /** Nanoseconds as {@code 95 ns}, {@code 1.2 us}, {@code 3.4 ms} or {@code 1.5 s}. */
    static String duration(double ns) {
        if (ns < 1_000) return String.format(Locale.ROOT, ns == Math.rint(ns) ? "%.0f ns" : "%.1f ns", ns);
        if (ns < 1_000_000) return String.format(Locale.ROOT, "%.2f us", ns / 1e3);
        if (ns < 1_000_000_000) return String.format(Locale.ROOT, "%.2f ms", ns / 1e6);
        return String.format(Locale.ROOT, "%.2f s", ns / 1e9);
    }
}
