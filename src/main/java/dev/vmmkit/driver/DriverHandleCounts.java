package dev.vmmkit.driver;

/**
 * How many physical handles the calls of each kind touched, and how large they were: a setAccess
 * or unmap over a range of N handles touches N (the driver charges per handle, GPU-FACTS), a map,
 * create or release one. Sizes are kept in power-of-two buckets with their byte totals, so a cost
 * model can price each handle by its size. Made by {@link CountingDriver}; immutable.
 */
public final class DriverHandleCounts {
    static final int BUCKETS = 64;
    private static final DriverHandleCounts NONE = new DriverHandleCounts(new long[DriverCall.all().length][BUCKETS],
            new long[DriverCall.all().length][BUCKETS]);

    private final long[][] counts;
    private final long[][] bytes;

    DriverHandleCounts(long[][] counts, long[][] bytes) {
        this.counts = counts;
        this.bytes = bytes;
    }

    /** No handle touched. */
    public static DriverHandleCounts none() {
        return NONE;
    }

    /** Handles touched by calls of {@code kind}. */
    public long handles(DriverCall kind) {
        long sum = 0;
        for (long c : counts[kind.ordinal()]) sum += c;
        return sum;
    }

    /** Receives one size bucket: how many handles, and their mean size in bytes. */
    @FunctionalInterface
    public interface BucketVisitor {
        void bucket(long handles, double meanBytes);
    }

    /** Visits the non-empty size buckets of {@code kind}. */
    public void forEachBucket(DriverCall kind, BucketVisitor visitor) {
        long[] c = counts[kind.ordinal()];
        long[] b = bytes[kind.ordinal()];
        for (int i = 0; i < BUCKETS; i++) {
            if (c[i] > 0) visitor.bucket(c[i], (double) b[i] / c[i]);
        }
    }

    static int bucketOf(long bytes) {
        return bytes <= 1 ? 0 : 63 - Long.numberOfLeadingZeros(bytes);
    }
}
