package dev.vmmkit.core;

/**
 * How much physical memory the manager may hold before free pages must move instead of new ones
 * being made: {@code max(peak of live bytes so far, live bytes with this request, VMM_PEAK_HINT) x
 * VMM_RESERVE_SLACK}, plus one page. The hint is a peak remembered from an earlier run (the peak
 * profile of {@code vmmkit run}), so the budget is right from the start.
 *
 * <p>Every figure comes from the manager's {@link MemoryAccounting}, so the regions of one manager
 * agree on the budget. Reads only atomics: callable with or without a region's lock.
 */
final class PhysicalBudget {
    private final MemoryAccounting accounting;
    private final VmmConfig config;
    private final long pageBytes;

    PhysicalBudget(MemoryAccounting accounting, VmmConfig config, long pageBytes) {
        this.accounting = accounting;
        this.config = config;
        this.pageBytes = pageBytes;
    }

    /** The peak of live bytes the budget is reckoned from, counting a request of {@code requested} bytes. */
    long peak(long requested) {
        return Math.max(config.peakHintBytes(), reached(requested));
    }

    /** The peak of live bytes the program has reached, counting a request of {@code requested} bytes. */
    private long reached(long requested) {
        return Math.max(accounting.peakLiveBytes(), accounting.liveBytes() + requested);
    }

    /**
     * The peak of live bytes handles are sized by ({@link HandleSizer#cap}): the peak the program has
     * reached, counting this request, and at least half its remembered peak. A run with a hint may
     * create up to the budget long before its peak; handles sized from the whole hint then strand
     * free pages inside partly live handles while the program grows (BERT inference with its peak
     * hinted: 1.051 against 1.032). The floor of half keeps what the hint buys a program that grows
     * from nothing, as a training step does: fewer, larger handles than a run without the hint
     * (docs/generation-traces.md, "Handles sized from the peak reached, under a hint").
     */
    long handlePeak(long requested) {
        return Math.max(reached(requested), config.peakHintBytes() / 2);
    }

    /** The physical bytes allowed while a request of {@code requested} bytes is placed. */
    long limit(long requested) {
        return (long) (peak(requested) * config.reserveSlack()) + pageBytes;
    }

    /** Whole pages that may still be made before the limit, 0 at or past it. */
    long room(long requested) {
        return Math.max(0, limit(requested) - accounting.physicalBytes()) & -pageBytes;
    }

    /**
     * Whether a request of {@code requested} bytes recycles memory rather than grows the program
     * (what {@link HandleSizer} sizes handles by): live bytes with it stay within their peak so far,
     * or within the peak hint once the peak reached is three quarters of it. Such a run has built its
     * working set and grows toward its remembered peak a little at a time, as a decoding loop's
     * caches grow by a token a step. With room in the budget those requests got capped handles that
     * stranded whole free pages at the peak, where a run without the hint, at its budget, makes
     * one-page handles: 51 of 53 trace classes hinted are now at or below 1.05, against 47. Before
     * three quarters, capped handles build the working set with fewer driver calls (counted from
     * the start, the rule cost a synthetic training trace 5x its hinted driver time;
     * docs/generation-traces.md, "One-page handles up to the hint").
     */
    boolean recycles(long requested) {
        long peak = accounting.peakLiveBytes();
        long hint = config.peakHintBytes();
        long upTo = peak >= hint - hint / 4 ? Math.max(peak, hint) : peak;
        return accounting.liveBytes() + requested <= upTo;
    }

    /** Physical bytes over the limit (0 or less when within it). */
    long excess(long requested) {
        return accounting.physicalBytes() - limit(requested);
    }

    /**
     * How far below the limit a trim after an overshoot goes: two pages where a page is more than
     * 1 % of the peak (a peak of under 100 pages), else nothing. An overshoot starts from what the
     * last trim left, and there each page it adds costs the ratio more than 1 %: a recorded U-Net
     * sampling trace (110 MiB peak) went from 1.070 to 1.033, with two pages of shortfall at its
     * peak; no other trace class moved (docs/generation-traces.md).
     */
    long trimMargin(long requested) {
        return pageBytes * 100 > peak(requested) ? 2 * pageBytes : 0;
    }

    /** True when mapping the pages of a block of {@code bytes} would pass the limit. */
    boolean wouldExceed(long bytes, long requested) {
        return accounting.physicalBytes() + ((bytes + pageBytes - 1) & -pageBytes) > limit(requested);
    }
}
