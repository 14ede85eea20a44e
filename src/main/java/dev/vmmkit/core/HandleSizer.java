package dev.vmmkit.core;

/**
 * How large the handles are that a region creates: each new handle covers as much of the run of
 * unbacked pages it fills as the cap allows. Fewer, larger handles cost less (setAccess and unmap
 * are charged per handle, GPU-FACTS), but a handle moves only whole: one that is partly live cannot
 * be reclaimed, and that is fragmentation. The driver maps, grants and unmaps a handle only whole (a
 * mapping at an offset into it, or an unmap of one of its pages, is refused: docs/allocator.md), so
 * its size is the only lever.
 *
 * <p>The cap ({@code VMM_HANDLE_CAP}) is fixed when set, and then sizes every handle. Otherwise it
 * is 1/64 of the peak of live bytes reached, or half the peak hint if more
 * ({@link PhysicalBudget#handlePeak}; so a stranded handle is a small share of the
 * working set: about 8 MiB for a 700 MiB inference, 128-256 MiB for a 13 GiB training run), a power
 * of two between one page and 1 GiB. An earlier version halved it whenever moving pages fell short
 * of the budget; since the region trims back to the budget after such a shortfall, the halving only
 * made moves dearer (BERT trace: 2.09 against 1.72 modelled us/op at the same ratio).
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
 *       partly live capped handles there (docs/allocator.md, "One-page handles at the budget").
 *       Without a peak hint the two tests mostly agree; with one the budget has room long before
 *       the peak, and only the second sees the recycling ({@link PhysicalBudget#recycles}, which
 *       counts up to the hint once the program is near it). A large request would be stitched
 *       from as many handles, each a setAccess and an unmap more.
 * </ul>
 *
 * <p>Stateless apart from its settings, so any thread may ask.
 */
final class HandleSizer {
    static final int PEAK_SHARE = 64;
    /** A request of more pages than this is large ({@link #isLarge}). */
    static final int LARGE_REQUEST_PAGES = 16;
    static final long LARGEST = 1L << 30;

    private final long pageBytes;
    private final long fixedCap;

    HandleSizer(long pageBytes, long fixedCap) {
        this.pageBytes = pageBytes;
        this.fixedCap = fixedCap == 0 ? 0 : Math.max(pageBytes, fixedCap & -pageBytes);
    }

    /** The largest handle to create now, given a peak of live bytes. */
    long cap(long peakLiveBytes) {
        if (fixedCap != 0) return fixedCap;
        long target = Math.max(pageBytes, Long.highestOneBit(Math.max(1, peakLiveBytes / PEAK_SHARE)));
        return Math.min(LARGEST, target);
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
     * The size of the next handle for a run with {@code missingBytes} still unbacked, for a
     * request of {@code requestedBytes}: one page when memory is {@code recycled} and the request
     * is not large, else up to the cap.
     */
    long nextHandleBytes(long missingBytes, long peakLiveBytes, long requestedBytes, boolean recycled) {
        if (fixedCap == 0 && recycled && !isLarge(requestedBytes)) return Math.min(missingBytes, pageBytes);
        return Math.min(missingBytes, cap(peakLiveBytes));
    }
}
