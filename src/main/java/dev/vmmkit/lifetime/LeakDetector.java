package dev.vmmkit.lifetime;

import java.lang.ref.ReferenceQueue;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Finds tensors that became unreachable while their reference count was above zero, in the style of
 * Netty's {@code ResourceLeakDetector}: a tracked tensor has a phantom reference; when the garbage
 * collector enqueues one that was never closed, the detector reports where the tensor was made and
 * its last accesses, gives its memory back and counts the leak.
 *
 * <p>Levels ({@code VMM_LEAK_DETECTION} or system property {@code vmmkit.leakDetection}):
 * {@code disabled} tracks nothing; {@code simple} (the default) tracks one tensor in
 * {@code vmmkit.leakDetection.samplingInterval} (128) with its creation site; {@code paranoid}
 * tracks every tensor with its creation site and last {@value LeakRecord#MAX_ACCESSES} accesses.
 * The queue is polled on every allocation and by {@link #check()}.
 *
 * <p>The queue is filled by the JVM's reference handler thread some time after a collection, so
 * polling it finds a leak late or, right after {@code System.gc()}, not at all. {@link #collectAndCheck()}
 * therefore does not wait on the queue: a collection clears the referent of every phantom reference
 * whose tensor it found unreachable before {@code System.gc()} returns, so it looks at each tracked
 * record directly ({@link java.lang.ref.Reference#refersTo refersTo(null)}) and repeats until a
 * collection finds nothing new.
 */
public final class LeakDetector {
    private static final System.Logger LOG = System.getLogger("dev.vmmkit.lifetime.leak");
    private static final int DEFAULT_SAMPLING_INTERVAL = 128;
    private static final int MAX_KEPT_REPORTS = 100;
    /** A tensor lost behind another lost one is found in the same collection; more rounds are a safety margin. */
    private static final int MAX_COLLECTIONS = 5;
    private static final AtomicLong TOTAL_LEAKS = new AtomicLong();

    /** How much the detector tracks. */
    public enum Level {
        DISABLED, SIMPLE, PARANOID;

        /** From {@code -Dvmmkit.leakDetection}, else env {@code VMM_LEAK_DETECTION}, else SIMPLE. */
        public static Level fromEnvironment() {
            String value = System.getProperty("vmmkit.leakDetection", System.getenv("VMM_LEAK_DETECTION"));
            return value == null || value.isBlank() ? SIMPLE : parse(value);
        }

        public static Level parse(String value) {
            try {
                return valueOf(value.strip().toUpperCase(Locale.ROOT));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("leak detection level '" + value
                        + "' is not one of disabled, simple, paranoid", e);
            }
        }
    }

    /** Gives back the memory of a leaked tensor. */
    @FunctionalInterface
    interface Reclaimer {
        void reclaim(long address, long bytes);
    }

    private final Level level;
    private final int samplingInterval;
    private final Reclaimer reclaimer;
    private final ReferenceQueue<Tensor> queue; // null: records are never enqueued, only swept
    private final Set<LeakRecord> open = ConcurrentHashMap.newKeySet();
    private final AtomicLong leaks = new AtomicLong();
    private final AtomicLong leakedBytes = new AtomicLong();
    private final List<String> reports = new ArrayList<>();

    /** A detector whose simple level samples as {@code vmmkit.leakDetection.samplingInterval} says (128). */
    LeakDetector(Level level, Reclaimer reclaimer) {
        this(level, Integer.getInteger("vmmkit.leakDetection.samplingInterval", DEFAULT_SAMPLING_INTERVAL), reclaimer);
    }

    LeakDetector(Level level, int samplingInterval, Reclaimer reclaimer) {
        this(level, samplingInterval, reclaimer, new ReferenceQueue<>());
    }

    /** With {@code queue} null, as if the reference handler never ran: only {@link #collectAndCheck()} finds leaks. */
    LeakDetector(Level level, int samplingInterval, Reclaimer reclaimer, ReferenceQueue<Tensor> queue) {
        this.queue = queue;
        this.level = level;
        this.samplingInterval = samplingInterval;
        this.reclaimer = reclaimer;
    }

    public Level level() {
        return level;
    }

    /** Leaks found so far by this detector. */
    public long leakCount() {
        return leaks.get();
    }

    /** Bytes given back from leaked tensors. */
    public long leakedBytes() {
        return leakedBytes.get();
    }

    /** Leaks found by every detector of this JVM (tests fail when it grows). */
    public static long totalLeakCount() {
        return TOTAL_LEAKS.get();
    }

    /** The most recent reports (up to 100), oldest first. */
    public List<String> reports() {
        synchronized (reports) {
            return List.copyOf(reports);
        }
    }

    /** Tensors tracked now (alive and sampled). */
    public int trackedCount() {
        return open.size();
    }

    /**
     * Reports and reclaims every tracked tensor the collector found unreachable and the reference
     * handler has enqueued since the last check; cheap, for every allocation. Returns how many were
     * found now. {@link #collectAndCheck()} finds every leak made so far.
     */
    public int check() {
        if (queue == null) return 0;
        int found = 0;
        for (LeakRecord record; (record = (LeakRecord) queue.poll()) != null; ) {
            if (found(record)) found++;
        }
        return found;
    }

    /**
     * Runs the collector and reports every tracked tensor it found unreachable, without waiting for
     * the reference queue: rounds of {@code System.gc()} and a sweep of the tracked records, until a
     * round finds nothing new. For the end of a run and for tests. Returns the leaks found by this
     * detector so far.
     */
    public long collectAndCheck() {
        check();
        for (int round = 0; round < MAX_COLLECTIONS; round++) {
            System.gc();
            if (sweep() == 0) break;
        }
        check(); // drops the enqueued records of leaks the sweep found (and finds any it could not)
        return leakCount();
    }

    /** Reports every tracked record whose tensor the collector has cleared; returns how many. */
    int sweep() {
        int found = 0;
        for (LeakRecord record : open) {
            if (record.refersTo(null) && found(record)) found++;
        }
        return found;
    }

    /**
     * Reports and reclaims {@code record}'s tensor unless it was closed normally or already found.
     * {@link LeakRecord#close} untracks before it clears the reference, so a record cleared by a
     * close is never still tracked here.
     */
    private boolean found(LeakRecord record) {
        if (!open.remove(record)) return false;
        leaks.incrementAndGet();
        TOTAL_LEAKS.incrementAndGet();
        leakedBytes.addAndGet(record.bytes);
        String report = record.report();
        synchronized (reports) {
            if (reports.size() == MAX_KEPT_REPORTS) reports.removeFirst();
            reports.add(report);
        }
        LOG.log(System.Logger.Level.ERROR, report);
        reclaimer.reclaim(record.address, record.bytes);
        return true;
    }

    /** Starts tracking a new tensor, or returns null when this level does not sample it. */
    LeakRecord track(Tensor tensor) {
        check();
        boolean sampled = switch (level) {
            case DISABLED -> false;
            case SIMPLE -> samplingInterval <= 1 || ThreadLocalRandom.current().nextInt(samplingInterval) == 0;
            case PARANOID -> true;
        };
        if (!sampled) return null;
        LeakRecord record = new LeakRecord(tensor, this, queue, level == Level.PARANOID);
        open.add(record);
        return record;
    }

    /** Stops tracking: the tensor was freed normally. */
    void untrack(LeakRecord record) {
        open.remove(record);
    }
}
