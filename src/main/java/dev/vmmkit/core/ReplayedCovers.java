package dev.vmmkit.core;

import java.util.Arrays;
import java.util.IdentityHashMap;
import java.util.Map;

/**
 * Covers a replay's device-wide frees where the trace says the program's device had finished the
 * work before them ({@code free_completed} of a cudaFree), instead of when a fence's thread happens
 * to synchronise: the replay then sees each freed block come back when the recorded program's
 * allocator did, and takes its decisions. The replay {@linkplain #markAfterFree marks} each
 * device-wide free right after making it and later {@linkplain #coverThrough covers} through a
 * mark; a synchronisation that a request waits for (the manager's fence runs it on the calling
 * thread, {@link DeviceWideFence#forReplay}) covers every free before it, as in the program,
 * unless the program's request gave up that wait ({@link #giveUpWaits}).
 *
 * <p>A synchronisation covers every free published before it started, so the frees a trace
 * completes are always the oldest ones: covering through a mark covers every earlier mark too.
 * No device work runs in a replay, so covering calls no driver function.
 *
 * <p>What each mark covers is kept in primitive arrays (a region and the sequence it had published),
 * which grow by doubling. Not thread-safe: one replaying thread.
 */
public final class ReplayedCovers {
    private final FreesToCover regions;
    private final Map<DeviceWideFrees, long[]> lastPublished = new IdentityHashMap<>();
    /** Entry i: {@code coverRegion[i]} is covered up to {@code coverSequence[i]}. */
    private DeviceWideFrees[] coverRegion = new DeviceWideFrees[1024];
    private long[] coverSequence = new long[1024];
    private int entries;
    /** The entries before {@code endOfMark[m]} are what mark m covers. */
    private int[] endOfMark = new int[1024];
    private int marks;
    private int coveredEntries;
    private boolean givingUpWaits;

    ReplayedCovers(FreesToCover regions) {
        this.regions = regions;
    }

    /** Right after a device-wide free: a mark that {@link #coverThrough} takes. */
    public int markAfterFree() {
        for (DeviceWideFrees frees : regions.regions()) {
            long published = frees.published();
            long[] last = lastPublished.computeIfAbsent(frees, f -> new long[] {Long.MIN_VALUE});
            if (published <= last[0]) continue;
            last[0] = published;
            if (entries == coverRegion.length) {
                coverRegion = Arrays.copyOf(coverRegion, 2 * entries);
                coverSequence = Arrays.copyOf(coverSequence, 2 * entries);
            }
            coverRegion[entries] = frees;
            coverSequence[entries++] = published;
        }
        if (marks == endOfMark.length) endOfMark = Arrays.copyOf(endOfMark, 2 * marks);
        endOfMark[marks] = entries;
        return marks++;
    }

    /**
     * While true, a request's wait for device-wide frees gives up at once, covering nothing: the
     * recorded program's request gave up waiting there ({@code wait_gave_up} in its trace), its
     * device still busy, and placed itself on other memory.
     */
    public void giveUpWaits(boolean giveUp) {
        givingUpWaits = giveUp;
    }

    boolean givingUpWaits() {
        return givingUpWaits;
    }

    /** The device finished the work before the free of {@code mark}: it and every earlier free are covered. */
    public void coverThrough(int mark) {
        if (mark < 0 || mark >= marks) throw new IllegalArgumentException("no device-wide free was marked " + mark);
        for (int end = endOfMark[mark]; coveredEntries < end; coveredEntries++) {
            coverRegion[coveredEntries].cover(coverSequence[coveredEntries]);
            coverRegion[coveredEntries] = null; // a closed region is not kept alive
        }
    }
}
