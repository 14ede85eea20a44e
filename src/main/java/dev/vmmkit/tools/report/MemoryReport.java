package dev.vmmkit.tools.report;

import com.fasterxml.jackson.annotation.JsonProperty;
import dev.vmmkit.tools.replay.ReplayReport;
import dev.vmmkit.tools.replay.ReplaySummary;
import dev.vmmkit.trace.AllocationTrace;

import java.util.List;

/**
 * Everything the HTML report shows for one trace: the figures of the text summary, the sampled
 * timeline, the address space at the peak and the largest allocations alive then.
 *
 * @param trace        the trace's name
 * @param driver       the driver replayed on
 * @param note         where the figures come from, shown under the title (may be empty)
 * @param figures      the summary's figures with what each means
 * @param timeline     live, reserved bytes and driver calls over the operations
 * @param peakOps      operations done when live bytes first reached their peak (0: no allocation)
 * @param addressSpace the allocator's address space right after that operation
 * @param largest      the largest allocations alive then
 * @param comparison   for a PyTorch snapshot, one sentence comparing vmmkit's reserved peak with PyTorch's (else empty)
 */
public record MemoryReport(
        @JsonProperty("trace") String trace,
        @JsonProperty("driver") String driver,
        @JsonProperty("note") String note,
        @JsonProperty("figures") List<SummaryFigures.Figure> figures,
        @JsonProperty("timeline") ReportSampler.Timeline timeline,
        @JsonProperty("peakOps") int peakOps,
        @JsonProperty("addressSpace") AddressSpaceCells addressSpace,
        @JsonProperty("largest") List<PeakAllocations.Allocation> largest,
        @JsonProperty("comparison") String comparison) {

    /** Number of largest allocations listed. */
    public static final int LARGEST = 20;

    /** The report of a replay of {@code trace} that {@code sampler} followed, with {@code summary}'s figures. */
    public static MemoryReport of(AllocationTrace trace, String driver, String note, ReplayReport summary,
                                  PeakAllocations peak, ReportSampler sampler, long pageBytes) {
        return new MemoryReport(trace.name(), driver, note, SummaryFigures.of(summary), sampler.timeline(),
                peak.peakOp() + 1, AddressSpaceCells.of(sampler.peakBlockMap(), pageBytes), peak.largest(),
                summary.recordedReservedPeakBytes() == null ? "" : ReplaySummary.comparedWithPyTorch(summary));
    }
}
