package dev.vmmkit.interpose;

import dev.vmmkit.driver.TimingDriver;
import dev.vmmkit.driver.VmmDriver;

import java.util.List;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * At {@code VMM_LOG=info}: where the time of the process's first large allocation (at least
 * {@value #FROM_BYTES} bytes) goes, as one line on stderr: the whole call inside Java, each driver
 * call it made (and any another thread made meanwhile), and the Java time before, between and
 * after them. A program's first large requests are what loading a model costs, and the only
 * requests whose cost is not the driver's alone: the Java code may run for the first time.
 *
 * <pre>
 * vmmkit: first large allocation 1073741824 bytes: 182.4 us in Java = driver 96.1 us (3 calls) + java 86.3 us;
 *   java 40.2 | create 1024M 20.1 | java 3.0 | map 1024M 0.8 | java 1.1 | set_access 1024M 75.2 | java 42.0
 * </pre>
 * (one line, printed when the program exits). The time the shim spends before and after Java is the
 * program's figure less this one.
 */
final class FirstLargeAllocation {
    static final long FROM_BYTES = 64L << 20;

    private final AtomicReferenceArray<TimingDriver> drivers = new AtomicReferenceArray<>(DeviceManagers.MAX_DEVICES);
    private final AtomicBoolean taken = new AtomicBoolean();
    private volatile boolean done;
    // Written by the timed call (begin, end) before done is set; read by report after it.
    private long sizeBytes;
    private long startNanos;
    private long endNanos;
    private TimingDriver timed;

    /** A timing adaptor over {@code driver}, which this breakdown arms for {@code device}'s first large allocation. */
    VmmDriver watch(int device, VmmDriver driver) {
        TimingDriver timing = new TimingDriver(driver);
        if (device >= 0 && device < drivers.length()) drivers.set(device, timing);
        return timing;
    }

    /** True for the first large request; one plain volatile read once done. */
    boolean wants(long size) {
        return !done && size >= FROM_BYTES && taken.compareAndSet(false, true);
    }

    /**
     * Starts timing the large allocation {@link #wants} accepted; {@link #end} follows in a finally.
     * Nothing is formatted or printed meanwhile (that would load classes inside the program's call,
     * as a lambda here would): {@link #report} prints at exit.
     */
    void begin(int device) {
        TimingDriver timing = device >= 0 && device < drivers.length() ? drivers.get(device) : null;
        if (timing != null) timing.arm();
        timed = timing;
        startNanos = System.nanoTime();
    }

    /** Ends the timing {@link #begin} started, of a request of {@code size} bytes. */
    void end(long size) {
        endNanos = System.nanoTime();
        if (timed != null) timed.disarm();
        sizeBytes = size;
        done = true;
    }

    /** Prints the breakdown, if a large allocation was timed (once, at the program's exit). */
    void report() {
        if (!done || sizeBytes == 0) return;
        InterposeLog.info(line(sizeBytes, startNanos, endNanos, timed == null ? List.of() : timed.calls()));
        sizeBytes = 0;
    }

    /** The breakdown of one call from {@code start} to {@code end} with {@code calls}. */
    static String line(long size, long start, long end, List<TimingDriver.Call> calls) {
        StringBuilder steps = new StringBuilder();
        StringBuilder others = new StringBuilder();
        long driverNanos = 0;
        int own = 0;
        long at = start;
        for (TimingDriver.Call c : calls) {
            String step = c.call().key() + (c.bytes() > 0 ? " " + megabytes(c.bytes()) : "") + " " + micros(c.nanos());
            if (c.otherThread()) {
                others.append(others.isEmpty() ? "" : " | ").append(step);
                continue;
            }
            steps.append("java ").append(micros(c.startNanos() - at)).append(" | ").append(step).append(" | ");
            driverNanos += c.nanos();
            own++;
            at = c.endNanos();
        }
        steps.append("java ").append(micros(end - at));
        long total = end - start;
        return "first large allocation " + size + " bytes: " + micros(total) + " us in Java = driver "
                + micros(driverNanos) + " us (" + own + " calls) + java " + micros(total - driverNanos) + " us; "
                + steps + (others.isEmpty() ? "" : "; other threads meanwhile: " + others);
    }

    private static String micros(long nanos) {
        return String.format(Locale.ROOT, "%.1f", nanos / 1e3);
    }

    private static String megabytes(long bytes) {
        return bytes % (1L << 20) == 0 ? (bytes >> 20) + "M" : bytes + "B";
    }
}
