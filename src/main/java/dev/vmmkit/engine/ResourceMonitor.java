package dev.vmmkit.engine;

import java.util.Locale;
import java.util.Optional;

/**
 * Polls device memory and host RAM, and relieves pressure past a threshold: first the caches
 * (vmmkit's allocator keeps freed device memory for reuse), then idle models in least-recently-used
 * order until the figure is under the threshold: evicted, or for device memory paused under
 * {@code --idle-policy pause}. A model with requests in flight is never evicted or paused.
 * ABI version 1 has no call to make an engine drop a cache, so for host RAM the engines' caches go
 * with their idle models too. Every action is logged with the figures.
 */
final class ResourceMonitor {
    private final MemoryReader device;
    private final MemoryReader ram;
    private final MemoryRelief relief;
    private final double vramThreshold;
    private final double ramThreshold;
    private final System.Logger logger;
    /** Logged once per episode of pressure with nothing left to evict, not every poll. */
    private boolean stuckReported;

    ResourceMonitor(MemoryReader device, MemoryReader ram, MemoryRelief relief, double vramThreshold,
                    double ramThreshold, System.Logger logger) {
        this.device = device;
        this.ram = ram;
        this.relief = relief;
        this.vramThreshold = vramThreshold;
        this.ramThreshold = ramThreshold;
        this.logger = logger;
    }

    /** One poll: reads both figures and acts on whichever is past its threshold. */
    synchronized void pollOnce() {
        boolean stuck = relieve("device memory", "vram", device, vramThreshold);
        stuck |= relieve("host RAM", "ram", ram, ramThreshold);
        if (!stuck) stuckReported = false;
    }

    /** Returns true when the figure stays past the threshold with nothing idle to evict. */
    private boolean relieve(String what, String reason, MemoryReader reader, double threshold) {
        MemoryFigures figures = reader.read();
        if (figures.fraction() <= threshold) return false;
        long cleared = relief.clearCaches();
        MemoryFigures after = reader.read();
        if (cleared > 0) {
            log(System.Logger.Level.WARNING, what + " " + figures + " past " + percent(threshold) + ": cleared "
                    + (cleared >> 10) + " KiB of cached memory, now " + after);
        }
        while (after.fraction() > threshold) {
            Optional<String> evicted = relief.relieveLeastRecentlyUsedIdle(reason);
            if (evicted.isEmpty()) {
                if (!stuckReported) {
                    log(System.Logger.Level.WARNING, what + " " + after + " past " + percent(threshold)
                            + ", and no idle model is left to evict");
                    stuckReported = true;
                }
                return true;
            }
            MemoryFigures before = after;
            after = reader.read();
            log(System.Logger.Level.WARNING, what + " " + before + " past " + percent(threshold) + ": "
                    + evicted.get() + ", now " + after);
        }
        return false;
    }

    private void log(System.Logger.Level level, String message) {
        logger.log(level, message);
    }

    private static String percent(double fraction) {
        return String.format(Locale.ROOT, "%.0f %%", fraction * 100);
    }
}
