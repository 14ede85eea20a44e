package dev.vmmkit.interpose;

import dev.vmmkit.driver.TimingDriver;
import dev.vmmkit.driver.VmmDriver;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * At {@code VMM_LOG=info}: where the time of the process's first call of each {@link Kind} goes (its
 * first large allocation, of at least {@value #FROM_BYTES} bytes, its first pause and its first
 * resume of a memory tag), one line each on stderr at exit: the whole call inside Java, each driver
 * call it made (and any another thread made meanwhile), and the Java time before, between and after
 * them. These are the calls a program makes once and users time: loading a model, handing its memory
 * back; the only ones whose cost is not the driver's alone, since their Java may run for the first time.
 *
 * <pre>
 * vmmkit: first large allocation 1073741824 bytes: 182.4 us in Java = driver 96.1 us (3 calls) + java 86.3 us;
 *   java 40.2 | create 1024M 20.1 | java 3.0 | map 1024M 0.8 | java 1.1 | set_access 1024M 75.2 | java 42.0
 * </pre>
 * (one line per kind, printed when the program exits). The time the shim spends before and after
 * Java is the program's figure less this one.
 */
final class FirstCalls {
    static final long FROM_BYTES = 64L << 20;

    /** The calls timed, each once per process. */
    enum Kind {
        LARGE_ALLOCATION("first large allocation"), PAUSE("first pause"), RESUME("first resume");

        final String label;

        Kind(String label) {
            this.label = label;
        }
    }

    /** One kind's timed call: which drivers it armed, its slice of their kept calls, what {@link #report} prints. */
    private static final class Timed {
        final AtomicBoolean taken = new AtomicBoolean();
        /** The device being timed (-1: every device) while the call runs, else NONE. */
        volatile int timing = NONE;
        volatile boolean done;
        // Written by the timed call before done is set; read by report after it. Per device: the
        // driver's kept calls from keptFrom to keptTo are this call's (-1: not armed).
        final int[] keptFrom = new int[DeviceManagers.MAX_DEVICES];
        final int[] keptTo = new int[DeviceManagers.MAX_DEVICES];
        long bytes;
        /** Whether the start-up warm-up's thread still ran when the call began. */
        boolean besideWarmUp;
        long startNanos;
        long endNanos;
    }

    private static final int NONE = Integer.MIN_VALUE;
    /** Loads {@link Kind} with this class, at start-up: loading a class inside the program's first call costs 100-600 us. */
    private static final Kind[] KINDS = Kind.values();
    private final AtomicReferenceArray<TimingDriver> drivers = new AtomicReferenceArray<>(DeviceManagers.MAX_DEVICES);
    /**
     * One past the highest device watched: a pause, timed over every device, looks no further (each
     * slot read costs about half a microsecond in a first call, interpreted).
     */
    private volatile int devicesWatched;
    private final Timed[] timed = {new Timed(), new Timed(), new Timed()};

    FirstCalls() {
        // Claims, begins and ends a throwaway call now (no driver is watched yet): the first run of
        // that code (the atomics' linkage, 50-300 us on the host) otherwise fell inside the
        // program's first timed call, which the program's own clock sees.
        Timed warm = new Timed();
        warm.taken.compareAndSet(false, true);
        begin(warm, 0);
        end(warm, 0);
    }

    /**
     * A timing adaptor over {@code driver}, which this breakdown arms for {@code device}'s timed
     * calls. A driver opened inside a timed call (a device's first allocation makes its
     * allocator) is armed at once.
     */
    VmmDriver watch(int device, VmmDriver driver) {
        TimingDriver timing = new TimingDriver(driver);
        if (device < 0 || device >= drivers.length()) return timing;
        drivers.set(device, timing);
        synchronized (this) {
            devicesWatched = Math.max(devicesWatched, device + 1);
        }
        for (Timed t : timed) {
            int armedFor = t.timing;
            if (armedFor != NONE && (armedFor < 0 || armedFor == device)) {
                t.keptFrom[device] = timing.kept();
                timing.arm();
            }
        }
        return timing;
    }

    /** True for the process's first large request; one plain volatile read once done. */
    boolean wants(long size) {
        return size >= FROM_BYTES && wants(Kind.LARGE_ALLOCATION);
    }

    /** True for the process's first call of {@code kind}; one plain volatile read once done. */
    boolean wants(Kind kind) {
        Timed t = timed[kind.ordinal()];
        return !t.done && t.taken.compareAndSet(false, true);
    }

    /**
     * Starts timing the call {@link #wants} accepted, on {@code device} (every device when negative:
     * a pause or resume reaches each allocator that knows the tag); {@link #end} follows in a
     * finally. One call is timed at a time. Nothing is formatted, copied or printed until
     * {@link #report}, at exit: that would load classes and allocate inside the program's call.
     */
    void begin(Kind kind, int device) {
        begin(timed[kind.ordinal()], device);
    }

    private void begin(Timed t, int device) {
        java.util.Arrays.fill(t.keptFrom, -1);
        t.timing = device < 0 ? -1 : device;
        int end = device < 0 ? devicesWatched : Math.min(device + 1, drivers.length());
        for (int d = Math.max(device, 0); d < end; d++) {
            TimingDriver timing = drivers.get(d);
            if (timing == null) continue;
            t.keptFrom[d] = timing.kept();
            timing.arm();
        }
        t.besideWarmUp = StartUpWarmUp.running();
        t.startNanos = System.nanoTime();
    }

    /** Ends the timing {@link #begin} started, of a call of {@code bytes} bytes (0 when it has no size). */
    void end(Kind kind, long bytes) {
        end(timed[kind.ordinal()], bytes);
    }

    private void end(Timed t, long bytes) {
        t.endNanos = System.nanoTime();
        t.timing = NONE;
        for (int d = 0, watched = devicesWatched; d < watched; d++) {
            if (t.keptFrom[d] < 0) continue;
            TimingDriver timing = drivers.get(d);
            timing.disarm();
            t.keptTo[d] = timing.kept();
        }
        t.bytes = bytes;
        t.done = true;
    }

    /** Prints the breakdown of each kind of call that was timed (once, at the program's exit). */
    void report() {
        for (Kind kind : KINDS) {
            Timed t = timed[kind.ordinal()];
            if (!t.done || t.endNanos == 0) continue;
            InterposeLog.info(line(kind, t.bytes, t.startNanos, t.endNanos, calls(kind))
                    + (t.besideWarmUp ? "; the start-up warm-up was still running" : "")
                    + (anyTimingFull() ? "; the timing kept too many calls to keep more: later ones count as java" : ""));
            t.endNanos = 0;
        }
    }

    private boolean anyTimingFull() {
        for (int d = 0; d < drivers.length(); d++) {
            if (drivers.get(d) != null && drivers.get(d).isFull()) return true;
        }
        return false;
    }

    /** The driver calls kept for {@code kind}'s timed call, over every device, in the order they started. */
    List<TimingDriver.Call> calls(Kind kind) {
        Timed t = timed[kind.ordinal()];
        List<TimingDriver.Call> calls = new ArrayList<>();
        if (!t.done) return calls;
        for (int d = 0; d < drivers.length(); d++) {
            if (t.keptFrom[d] >= 0) calls.addAll(drivers.get(d).calls(t.keptFrom[d], t.keptTo[d]));
        }
        calls.sort((a, b) -> Long.compare(a.startNanos(), b.startNanos()));
        return calls;
    }

    /** The breakdown of one call of {@code kind} from {@code start} to {@code end} with {@code calls}. */
    static String line(Kind kind, long bytes, long start, long end, List<TimingDriver.Call> calls) {
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
        return kind.label + (bytes > 0 ? " " + bytes + " bytes" : "") + ": " + micros(total) + " us in Java = driver "
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
