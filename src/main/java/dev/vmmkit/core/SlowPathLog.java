package dev.vmmkit.core;

import dev.vmmkit.driver.DriverAdaptor;
import dev.vmmkit.driver.DryDriver;
import dev.vmmkit.driver.VmmLog;

import java.lang.System.Logger.Level;
import java.util.Locale;

/**
 * At {@code VMM_LOG=debug}, one line per cache miss of a region: the request, what the budget saw
 * when the miss began (live bytes and their peak, physical bytes against the limit, free bytes and
 * how many of them still wait for device work), whether the request waited for pending frees and
 * what that bought, and physical and free bytes when it was served. Beside the driver's calls,
 * which the same level logs, it says why each was made; and the line where physical memory rises
 * past what live bytes need shows what stood in the way: frees still pending, or free pages in
 * handles that hold live bytes too, which cannot move (docs/cold-path.md, "Mask R-CNN's live
 * runs: which free pages could move").
 */
final class SlowPathLog {
    static final String LOGGER_NAME = "dev.vmmkit.core.slowpath";
    private static final System.Logger LOG = System.getLogger(LOGGER_NAME);

    private final RegionHeap region;
    private final String regionName;

    private SlowPathLog(RegionHeap region, String regionName) {
        this.region = region;
        this.regionName = regionName;
    }

    /**
     * The log of {@code region}'s misses, or null when debug logging is off, so that a miss then pays
     * one null check. A region on a {@link DryDriver} logs nothing: its misses are the start-up
     * warm-up's, not the program's.
     */
    static SlowPathLog of(RegionHeap region, String regionName) {
        if (!VmmLog.isDebug() || DriverAdaptor.innermost(region.driver) instanceof DryDriver) return null;
        VmmLog.routeDebugToStderr(LOGGER_NAME, "vmmkit slow path: ");
        return new SlowPathLog(region, regionName);
    }

    /** Starts the line of a miss for {@code bytes}, with {@code beside} bytes of waiting same-size blocks counted beside it. */
    Miss begin(long bytes, long beside, long counted) {
        return new Miss(bytes, beside, state(counted, true));
    }

    /** Physical and free bytes, and with {@code budget} the budget's figures, as one clause. */
    private String state(long counted, boolean budget) {
        long free;
        long pending;
        region.lock.lock();
        try {
            free = region.freeLists.freeBytes();
            pending = region.freeLists.pendingBytes();
        } finally {
            region.lock.unlock();
        }
        MemoryAccounting accounting = region.accounting;
        String physical = budget
                ? "live " + ByteSize.formatMiB(accounting.liveBytes()) + " (peak " + ByteSize.formatMiB(accounting.peakLiveBytes())
                + "), physical " + ByteSize.formatMiB(accounting.physicalBytes()) + " of a "
                + ByteSize.formatMiB(region.budget.limit(counted)) + " budget"
                : "physical " + ByteSize.formatMiB(accounting.physicalBytes());
        return physical + ", free " + ByteSize.formatMiB(free) + " (" + ByteSize.formatMiB(pending) + " of it pending)";
    }

    /** One miss's line, filled in as the slow path goes. */
    final class Miss {
        private final long bytes;
        private final long beside;
        private final String before;
        private long waitStartNanos;
        private String wait = "within the budget, no wait";

        private Miss(long bytes, long beside, String before) {
            this.bytes = bytes;
            this.beside = beside;
            this.before = before;
        }

        void waitStarts() {
            waitStartNanos = System.nanoTime();
        }

        void waitEnded(boolean freed, boolean servedFromThem) {
            wait = String.format(Locale.ROOT, "over the budget: waited %.3f ms, %s",
                    (System.nanoTime() - waitStartNanos) / 1e6,
                    !freed ? "no pending free became usable" : servedFromThem ? "served from the frees it waited for" : "the frees it waited for did not fit");
        }

        void end(long counted) {
            LOG.log(Level.DEBUG, () -> regionName + ", " + ByteSize.format(bytes) + " request"
                    + (beside > 0 ? " (and " + ByteSize.formatMiB(beside) + " of waiting blocks of its size counted beside it)" : "")
                    + "; before: " + before + "; " + wait + "; after: " + state(counted, false));
        }
    }
}
