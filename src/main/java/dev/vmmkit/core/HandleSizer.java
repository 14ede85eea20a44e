package dev.vmmkit.core;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * How large the handles are that a region creates: each new handle covers as much of the run of
 * unbacked pages it fills as the cap allows. Fewer, larger handles cost less (setAccess and unmap
 * are charged per handle, GPU-FACTS), but a handle moves only whole: one that is partly live cannot
 * be reclaimed, and that is fragmentation. The driver maps, grants and unmaps a handle only whole (a
 * mapping at an offset into it, or an unmap of one of its pages, is refused:
 * docs/generation-traces.md, "The family, and what passes 1.05"), so its size is the only lever.
 *
 * <p>The cap ({@code VMM_HANDLE_CAP}) is fixed when set, and then sizes every handle. Otherwise it
 * is 1/64 of the peak of live bytes reached, or half the peak hint if more
 * ({@link PhysicalBudget#handlePeak}; so a stranded handle is a small share of the
 * working set: about 8 MiB for a 700 MiB inference, 128-256 MiB for a 13 GiB training run), a power
 * of two between one page and 1 GiB, halved at most {@value #MOST_HALVINGS} times over the region's
 * life ({@link #movingFellShort}): once each time moving pages fell short of the budget for a
 * request that is not large, while the cap is above one page. Such a shortfall means whole free
 * pages sat in partly live handles where no move could take them, and a decoding loop that strands
 * pages once does it at every step: its caches, copied a token longer per step, pinned 16 MiB
 * handles of a 1.1 GiB program (1.145; 1.039 with the halving). Over 80 random generate() programs
 * ({@code GenerationPopulation}, two seeds) the runs at or below 1.05 went from 59 to 62 and the
 * mean ratio from 1.0426 to 1.0394, at 2.6 % more modelled driver time over the trace classes; runs
 * with a peak hint, BERT and JAX kept every figure. The two conditions matter: every program falls
 * short in its first requests, where the budget is a page or two and the cap one page, and
 * halvings taken there made every later handle a quarter as large (JAX first runs 1.5-2.1x the
 * allocator time on an H200); a large request's shortfalls are a varying-shape inference's page
 * moves (a warm BERT pass: twice the driver calls). Unbounded halving made moves dearer for no
 * gain (docs/generation-traces.md, "Random programs, and a cap halved where moving fell short").
 *
 * <p>Two kinds of request are sized apart from the cap, split at {@value #LARGE_REQUEST_PAGES}
 * pages ({@link #isLarge}):
 * <ul>
 *   <li>A loading region's large request backed from nothing gets one handle for its pages
 *       ({@link #backsLoadingWithOneHandle}), as native cudaMalloc makes one allocation: weights
 *       that mostly live long. A smaller one made while loading is as likely a first forward pass's
 *       activation, soon freed and recycled, and gets capped handles.
 *   <li>A request that is not large, made while memory is recycled ({@code recycled}: its pages
 *       must move because the budget has no room, or it keeps live bytes within their peak so
 *       far, or near a peak hint within the hint), gets one-page handles for whatever is created
 *       for it: those pages are what a later trim must give back, and in one-page handles each
 *       wholly free one can move while its neighbours live. Large-batch generation (key and value
 *       caches of several MiB copied one token longer per step) stranded whole free pages in
 *       partly live capped handles there (docs/generation-traces.md, "One-page handles at the budget").
 *       Without a peak hint the two tests mostly agree; with one the budget has room long before
 *       the peak, and only the second sees the recycling ({@link PhysicalBudget#recycles}, which
 *       counts up to the hint once the program is near it). A large request would be stitched
 *       from as many handles, each a setAccess and an unmap more.
 * </ul>
 *
 * <p>Its one piece of state, the halvings, only grows and is read and written atomically, so any
 * thread may ask.
 */
final class HandleSizer {
    static final int PEAK_SHARE = 64;
    /** A request of more pages than this is large ({@link #isLarge}). */
    static final int LARGE_REQUEST_PAGES = 16;
    static final long LARGEST = 1L << 30;
    /** How many times shortfalls may halve the adaptive cap. */
    static final int MOST_HALVINGS = 2;

    private final long pageBytes;
    private final long fixedCap;
    private final AtomicInteger halvings = new AtomicInteger();

    HandleSizer(long pageBytes, long fixedCap) {
        this.pageBytes = pageBytes;
        this.fixedCap = fixedCap == 0 ? 0 : Math.max(pageBytes, fixedCap & -pageBytes);
    }

    /** The largest handle to create now, given a peak of live bytes. */
    long cap(long peakLiveBytes) {
        if (fixedCap != 0) return fixedCap;
        long target = Math.min(LARGEST, Long.highestOneBit(Math.max(1, peakLiveBytes / PEAK_SHARE)));
        return Math.max(pageBytes, target >> halvings.get());
    }

    /**
     * Moving pages fell short of the budget for a request of {@code requestedBytes}, with the cap
     * sized by {@code peakLiveBytes}: halves the adaptive cap, up to {@value #MOST_HALVINGS} times,
     * unless the request is large or the cap is one page already.
     */
    void movingFellShort(long requestedBytes, long peakLiveBytes) {
        if (isLarge(requestedBytes) || halvings.get() >= MOST_HALVINGS || cap(peakLiveBytes) <= pageBytes) return;
        halvings.getAndUpdate(h -> Math.min(MOST_HALVINGS, h + 1));
    }

    /** Whether a request of {@code bytes} is large: more than {@value #LARGE_REQUEST_PAGES} pages. */
    boolean isLarge(long bytes) {
        return bytes > LARGE_REQUEST_PAGES * pageBytes;
    }

    /**
     * Whether a loading request whose whole pages are {@code wholeBytes} gets one handle for them
     * ({@link #firstBackingBytes}): only a large one.
     */
    boolean backsLoadingWithOneHandle(long wholeBytes) {
        return isLarge(wholeBytes);
    }

    /**
     * The size of the one handle that backs a loading request's {@code missingBytes} from nothing
     * (see {@link RegionHeap#loading}): all of them, unless a fixed cap is set, which always holds.
     */
    long firstBackingBytes(long missingBytes) {
        return fixedCap != 0 ? Math.min(missingBytes, fixedCap) : missingBytes;
    }

    /**
     * Whether moving pages fell far short: under a peak hint ({@code peakHinted}), the handles in
     * hand ({@code inHandBytes}, pooled and moved) cover less than half of the
     * {@code mustComeFromFreeBytes} that had to come from free memory, the budget having no room for
     * them. Then most free pages sit in partly live handles, and capped handles made now strand
     * pages the same way once their request is freed and smaller blocks recycle them. Only under a
     * hint: there the budget has held the program's remembered peak from the start, so a shortfall
     * is stranding and never the budget catching up with a program still growing. The request's
     * new handles are then one page each, large or not ({@link #nextHandleBytes}). A decoding
     * step's growing ~50 MiB request, short by 10-44 MiB at every step, had pinned 122 MiB in 16 MiB
     * handles of a 1.1 GiB program (1.131 hinted; 1.050 with the rule). Over 120 random generate()
     * programs the hinted runs at or below 1.05 went from 95 to 98 and the worst from 1.131 to
     * 1.081; runs without a hint kept every figure, and so did the hinted trace classes. A shortfall
     * of a page or two in sixty is rounding (BERT's varying shapes), where capped handles stay
     * cheaper; without the hint the same rule added a quarter to a warm BERT pass's driver calls
     * (docs/generation-traces.md, "Moves that fell far short under a hint: one-page handles").
     */
    static boolean fellFarShort(long inHandBytes, long mustComeFromFreeBytes, boolean peakHinted) {
        return peakHinted && inHandBytes * 2 < mustComeFromFreeBytes;
    }

    /**
     * The size of the next handle for a run with {@code missingBytes} still unbacked, for a
     * request of {@code requestedBytes}: one page when memory is {@code recycled} and the request
     * is not large, or when moving pages for it {@code fellFarShort} ({@link #fellFarShort}), else
     * up to the cap.
     */
    long nextHandleBytes(long missingBytes, long peakLiveBytes, long requestedBytes, boolean recycled,
                         boolean fellFarShort) {
        if (fixedCap == 0 && (recycled && !isLarge(requestedBytes) || fellFarShort)) {
            return Math.min(missingBytes, pageBytes);
        }
        return Math.min(missingBytes, cap(peakLiveBytes));
    }
}
