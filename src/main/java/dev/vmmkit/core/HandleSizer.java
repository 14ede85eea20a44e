package dev.vmmkit.core;

/**
 * How large the handles are that a region creates: each new handle covers as much of the run of
 * unbacked pages it fills as the cap allows. Fewer, larger handles cost less (setAccess and unmap
 * are charged per handle, GPU-FACTS), but a handle moves only whole: one that is partly live cannot
 * be reclaimed, and that is fragmentation.
 *
 * <p>The cap ({@code VMM_HANDLE_CAP}) is fixed when set. Otherwise it adapts: 1/64 of the peak of
 * live bytes (so a stranded handle is a small share of the working set: about 8 MiB for a 700 MiB
 * inference, 256 MiB for a 13 GiB training run), halved each time reclaiming fell short of what the
 * budget asked for (large handles ended up partly live), and doubled back after a reclaim that got
 * everything it wanted. Always a power of two between one page and 1 GiB.
 *
 * <p>Not thread-safe on its own: the region calls it under its lock, or tolerates a stale cap.
 */
final class HandleSizer {
    static final int PEAK_SHARE = 64;
    static final long LARGEST = 1L << 30;

    private final long pageBytes;
    private final long fixedCap;
    private volatile int shrink;

    HandleSizer(long pageBytes, long fixedCap) {
        this.pageBytes = pageBytes;
        this.fixedCap = fixedCap == 0 ? 0 : Math.max(pageBytes, fixedCap & -pageBytes);
    }

    /** The largest handle to create now, given the peak of live bytes the budget uses. */
    long cap(long peakLiveBytes) {
        if (fixedCap != 0) return fixedCap;
        long target = Math.max(pageBytes, Long.highestOneBit(Math.max(1, peakLiveBytes / PEAK_SHARE)));
        long cap = Math.min(LARGEST, target) >>> shrink;
        return Math.max(pageBytes, cap);
    }

    /** The size of the next handle for a run with {@code missingBytes} still unbacked. */
    long nextHandleBytes(long missingBytes, long peakLiveBytes) {
        return Math.min(missingBytes, cap(peakLiveBytes));
    }

    /** Reclaiming got less than the budget asked for: large handles are stranded, make smaller ones. */
    void reclaimFellShort() {
        if (fixedCap == 0 && shrink < 30) shrink++;
    }

    /** Reclaiming got all it wanted: handles may grow back. */
    void reclaimSufficed() {
        if (shrink > 0) shrink--;
    }
}
