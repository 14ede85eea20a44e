package dev.vmmkit.engine;

/** Used and total bytes of one kind of memory (device or host RAM) at one moment. */
public record MemoryFigures(long usedBytes, long totalBytes) {

    /** Used share of the total, 0 when the total is unknown. */
    public double fraction() {
        return totalBytes <= 0 ? 0 : (double) usedBytes / totalBytes;
    }

    @Override
    public String toString() {
        return String.format(java.util.Locale.ROOT, "%d of %d MiB (%.1f %%)", usedBytes >> 20, totalBytes >> 20, 100 * fraction());
    }
}
