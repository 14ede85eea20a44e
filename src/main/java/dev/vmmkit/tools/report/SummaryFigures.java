package dev.vmmkit.tools.report;

import com.fasterxml.jackson.annotation.JsonProperty;
import dev.vmmkit.tools.replay.ReplayReport;
import dev.vmmkit.tools.replay.ReplaySummary;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/** The figures of the text summary ({@link ReplaySummary}) as table rows, each with what it means. */
public final class SummaryFigures {

    /** One row: name, value as the summary prints it, and its meaning. */
    public record Figure(@JsonProperty("name") String name, @JsonProperty("value") String value,
                         @JsonProperty("meaning") String meaning) {
    }

    private SummaryFigures() {
    }

    public static List<Figure> of(ReplayReport r) {
        List<Figure> rows = new ArrayList<>();
        rows.add(new Figure("operations", String.format(Locale.ROOT, "%,d (%,d allocs, %,d frees)", r.ops(), r.allocs(), r.frees()),
                "requests replayed from the trace"));
        rows.add(new Figure("peak live", ReplaySummary.bytes(r.peakLiveBytes()),
                "most bytes the program had asked for and not yet freed, at one time"));
        rows.add(new Figure("peak reserved", ReplaySummary.bytes(r.peakReservedBytes()),
                "most physical memory the allocator held at one time (mapped pages plus cached handles)"));
        rows.add(new Figure("fragmentation ratio", ReplaySummary.fragmentationRatio(r),
                "peak reserved / peak live; 1.000 is perfect"));
        rows.add(new Figure("hit rate", ReplaySummary.hitRate(r),
                "allocations served from memory already mapped, with no driver call"));
        rows.add(new Figure("driver calls", ReplaySummary.driverCalls(r.driverCalls()),
                "calls of CUDA's virtual memory API by kind; a map call maps one page, a set_access call a whole mapped run"));
        rows.add(new Figure("driver calls per op", ReplaySummary.callsPerOp(r),
                "all driver calls / operations"));
        rows.add(new Figure("alloc p50 / p99", ReplaySummary.p50(r.allocNs(), r.allocs()) + " / " + ReplaySummary.p99(r.allocNs(), r.allocs()),
                "median and 99th percentile of one allocate call, including one clock read"));
        rows.add(new Figure("free p50 / p99", ReplaySummary.p50(r.freeNs(), r.frees()) + " / " + ReplaySummary.p99(r.freeNs(), r.frees()),
                "median and 99th percentile of one free call"));
        rows.add(new Figure("wall per op", ReplaySummary.wallPerOp(r),
                "the whole replay loop's time / operations: a mean, so the rare slow calls that p50 hides count in full"));
        return rows;
    }
}
