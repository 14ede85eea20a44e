package dev.vmmkit.tools;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;

import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.StreamEvents;
import dev.vmmkit.driver.DriverKind;
import dev.vmmkit.driver.VmmDriver;
import dev.vmmkit.driver.cuda.CudaDriver;
import dev.vmmkit.driver.cuda.CudaMemcpy;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code vmmkit driver-bench}: times the driver's virtual-memory calls one by one, for comparison
 * with the C figures in GPU-FACTS.md. Each iteration is timed with System.nanoTime after a warm-up.
 *
 * <ol type="a">
 *   <li>map + setAccess + unmap of one cached handle into a fresh VA each time (the cost of a
 *       cache that remaps instead of keeping ranges mapped);</li>
 *   <li>each call alone: create, release, map, setAccess, unmap, reserve, addressFree;</li>
 *   <li>a trivial driver call (cuCtxGetCurrent), i.e. the cost of crossing FFM at all;</li>
 *   <li>setAccess and unmap over a range stitched from N handles versus one handle of the same
 *       total size (the cost grows with the number of handles).</li>
 * </ol>
 */
@Command(name = "driver-bench",
        mixinStandardHelpOptions = true,
        description = "Times the driver's virtual-memory calls (median and p90 in microseconds).")
public final class DriverBenchCommand implements Callable<Integer> {

    private static final long MAX_BENCH_VA = 256L << 30;
    private static final int TRIVIAL_CALLS_PER_SAMPLE = 100;
    private static final int MAX_STITCH_ITERATIONS = 100;

    @Mixin
    DriverOptions driverOptions = new DriverOptions(DriverKind.CUDA);

    @Option(names = "--iterations", defaultValue = "2000", description = "Timed iterations (default: ${DEFAULT-VALUE}).")
    int iterations;

    @Option(names = "--size", defaultValue = "2M", converter = ByteSizeConverter.class,
            description = "Handle size, a multiple of the granularity (default: ${DEFAULT-VALUE}).")
    long size;

    @Option(names = "--stitch", defaultValue = "32",
            description = "Handles stitched into one range for part (d) (default: ${DEFAULT-VALUE}).")
    int stitchedHandles;

    @Option(names = "--first", converter = ByteSizeConverter.class,
            description = "Instead of the benchmark: time this process's first allocation of this size, one call each, and print one JSON line.")
    Long firstSize;

    @Option(names = "--first-before", defaultValue = "LINKED",
            description = "What runs before --first's allocation: ${COMPLETION-CANDIDATES} (default: ${DEFAULT-VALUE}).")
    FirstAllocationTiming.Before firstBefore;

    private final PrintStream out;
    private final List<LatencySamples> results = new ArrayList<>();

    public DriverBenchCommand() {
        this(System.out);
    }

    DriverBenchCommand(PrintStream out) {
        this.out = out;
    }

    @Override
    public Integer call() {
        if (iterations < 1 || stitchedHandles < 1) {
            System.err.println("driver-bench: --iterations and --stitch must be at least 1");
            return 2;
        }
        VmmDriver driver;
        try {
            driver = driverOptions.open();
        } catch (DriverException e) {
            System.err.println("driver-bench: cannot open the " + driverOptions.kindName() + " driver: " + e.getMessage());
            return 1;
        }
        try (driver) {
            if (firstSize != null) {
                if (!wholeGranules("--first", firstSize, driver)) return 2;
                try {
                    FirstAllocationTiming.run(driver, firstSize, firstBefore, out);
                } catch (IllegalArgumentException e) { // a malformed VMM_* setting, for --first-before manager
                    System.err.println("driver-bench: " + e.getMessage());
                    return 2;
                }
                return 0;
            }
            if (!wholeGranules("--size", size, driver)) return 2;
            printHeader(driver);
            if (driver instanceof CudaDriver cuda) {
                checkData(cuda);
                checkEvents(cuda);
                checkContextOnNewThread(cuda);
            }
            benchEachCall(driver);
            if (driver instanceof CudaDriver cuda) {
                benchTrivialCall(cuda);
            }
            benchStitchedVersusSingle(driver);
            printTable();
            return 0;
        } catch (DriverException e) {
            System.err.println("driver-bench: " + e.getMessage());
            return 1;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return 1;
        }
    }

    private int warmup() {
        return Math.min(iterations, Math.max(10, iterations / 10));
    }

    /** True when {@code bytes} is a positive multiple of the driver's granularity; else says so for {@code option}. */
    private static boolean wholeGranules(String option, long bytes, VmmDriver driver) {
        if (bytes > 0 && bytes % driver.granularity() == 0) return true;
        System.err.println("driver-bench: " + option + " " + bytes + " is not a positive multiple of the granularity "
                + driver.granularity());
        return false;
    }

    private void printHeader(VmmDriver driver) {
        VmmDriver.MemoryInfo memory = driver.memoryInfo();
        out.printf(Locale.ROOT, "driver-bench: driver=%s device=%d granularity=%s size=%s iterations=%d (warm-up %d)%n",
                driver.name(), driver.device(), ByteSizeConverter.format(driver.granularity()),
                ByteSizeConverter.format(size), iterations, warmup());
        out.printf(Locale.ROOT, "device memory: %s free of %s%n",
                ByteSizeConverter.format(memory.freeBytes()), ByteSizeConverter.format(memory.totalBytes()));
    }

    /** Before timing anything, proves a fresh mapping really holds data (catches wrong structs early). */
    private void checkData(CudaDriver driver) {
        long va = driver.reserve(size, 0);
        try {
            long handle = driver.create(size);
            try {
                driver.mapWithAccess(va, size, handle);
                try {
                    CudaMemcpy copy = new CudaMemcpy(driver);
                    copy.fill(va, size, 1);
                    long mismatch = copy.firstMismatch(va, size, 1);
                    out.println(mismatch < 0
                            ? "data check: wrote and read back " + ByteSizeConverter.format(size) + " through a fresh mapping: ok"
                            : "data check: FAILED, first wrong word at offset " + mismatch);
                } finally {
                    driver.unmap(va, size);
                }
            } finally {
                driver.release(handle);
            }
        } finally {
            driver.addressFree(va, size);
        }
    }

    /** An event recorded on the idle default stream must complete. */
    private void checkEvents(CudaDriver driver) {
        StreamEvents events = driver.events();
        long event = events.create();
        try {
            events.record(event, 0);
            events.synchronize(event);
            out.println("events check: record, synchronize, query on the default stream: "
                    + (events.isComplete(event) ? "ok" : "FAILED, not complete after synchronize"));
        } finally {
            events.destroy(event);
        }
    }

    /** A thread with no CUDA context must get the primary context on its first driver call. */
    private void checkContextOnNewThread(CudaDriver driver) {
        long[] seen = new long[2];
        RuntimeException[] failure = new RuntimeException[1];
        Thread thread = new Thread(() -> {
            try {
                seen[0] = driver.currentContext();
                long va = driver.reserve(driver.granularity(), 0);
                seen[1] = driver.currentContext();
                driver.addressFree(va, driver.granularity());
            } catch (RuntimeException e) {
                failure[0] = e;
            }
        }, "vmmkit-context-check");
        thread.start();
        try {
            thread.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return;
        }
        if (failure[0] != null) {
            throw failure[0];
        }
        boolean ok = seen[0] == 0 && seen[1] == driver.primaryContext();
        out.printf(Locale.ROOT, "context check: new thread had 0x%x, after a call 0x%x (primary 0x%x): %s%n",
                seen[0], seen[1], driver.primaryContext(), ok ? "ok" : "UNEXPECTED");
    }

    /**
     * (a) One cached handle mapped into a new slot of a large reservation, granted access and
     * unmapped, as one cycle; (b) every call timed on its own.
     */
    private void benchEachCall(VmmDriver driver) {
        LatencySamples cycle = sample("map+setAccess+unmap (cached handle, fresh VA)");
        LatencySamples create = sample("create");
        LatencySamples release = sample("release");
        for (int i = 0; i < warmup() + iterations; i++) {
            boolean timed = i >= warmup();
            long t0 = System.nanoTime();
            long handle = driver.create(size);
            long t1 = System.nanoTime();
            driver.release(handle);
            long t2 = System.nanoTime();
            if (timed) {
                create.add(t1 - t0);
                release.add(t2 - t1);
            }
        }

        LatencySamples map = sample("map");
        LatencySamples setAccess = sample("setAccess");
        LatencySamples unmap = sample("unmap");
        int total = warmup() + iterations;
        int slots = (int) Math.max(1, Math.min(total, MAX_BENCH_VA / size));
        long base = driver.reserve(slots * size, 0);
        try {
            long handle = driver.create(size);
            try {
                for (int i = 0; i < total; i++) {
                    long va = base + (i % slots) * size;
                    long t0 = System.nanoTime();
                    driver.map(va, size, handle);
                    long t1 = System.nanoTime();
                    driver.setAccess(va, size);
                    long t2 = System.nanoTime();
                    driver.unmap(va, size);
                    long t3 = System.nanoTime();
                    if (i >= warmup()) {
                        cycle.add(t3 - t0);
                        map.add(t1 - t0);
                        setAccess.add(t2 - t1);
                        unmap.add(t3 - t2);
                    }
                }
            } finally {
                driver.release(handle);
            }
        } finally {
            driver.addressFree(base, slots * size);
        }

        LatencySamples reserve = sample("reserve");
        LatencySamples addressFree = sample("addressFree");
        for (int i = 0; i < warmup() + iterations; i++) {
            long t0 = System.nanoTime();
            long va = driver.reserve(size, 0);
            long t1 = System.nanoTime();
            driver.addressFree(va, size);
            long t2 = System.nanoTime();
            if (i >= warmup()) {
                reserve.add(t1 - t0);
                addressFree.add(t2 - t1);
            }
        }
    }

    /** (c) cuCtxGetCurrent, timed in batches because one call is close to System.nanoTime's own cost. */
    private void benchTrivialCall(CudaDriver driver) {
        LatencySamples trivial = new LatencySamples("cuCtxGetCurrent (trivial call, FFM overhead)", iterations,
                TRIVIAL_CALLS_PER_SAMPLE);
        results.add(trivial);
        long sink = 0;
        for (int i = 0; i < warmup() + iterations; i++) {
            long start = System.nanoTime();
            for (int call = 0; call < TRIVIAL_CALLS_PER_SAMPLE; call++) {
                sink += driver.currentContext();
            }
            long end = System.nanoTime();
            if (i >= warmup()) {
                trivial.add(end - start);
            }
        }
        if (sink == 42) {
            out.println(); // keeps the loop's result alive; practically never prints
        }
    }

    /** (d) setAccess and unmap over N stitched handles versus over one handle of the same total size. */
    private void benchStitchedVersusSingle(VmmDriver driver) {
        int rounds = Math.min(iterations, MAX_STITCH_ITERATIONS);
        int warm = Math.min(rounds, 5);
        long rangeSize = stitchedHandles * size;
        String stitched = stitchedHandles + "x" + ByteSizeConverter.format(size);
        String single = "1x" + ByteSizeConverter.format(rangeSize);
        LatencySamples stitchedMap = sample("map " + stitched + " (all maps)");
        LatencySamples stitchedAccess = sample("setAccess over " + stitched);
        LatencySamples stitchedUnmap = sample("unmap over " + stitched);
        LatencySamples singleMap = sample("map " + single);
        LatencySamples singleAccess = sample("setAccess over " + single);
        LatencySamples singleUnmap = sample("unmap over " + single);

        long va = driver.reserve(rangeSize, 0);
        long[] handles = new long[stitchedHandles];
        int created = 0;
        long bigHandle = 0;
        try {
            for (; created < stitchedHandles; created++) {
                handles[created] = driver.create(size);
            }
            bigHandle = driver.create(rangeSize);
            for (int round = 0; round < warm + rounds; round++) {
                boolean timed = round >= warm;
                long t0 = System.nanoTime();
                for (int i = 0; i < stitchedHandles; i++) {
                    driver.map(va + i * size, size, handles[i]);
                }
                long t1 = System.nanoTime();
                driver.setAccess(va, rangeSize);
                long t2 = System.nanoTime();
                driver.unmap(va, rangeSize);
                long t3 = System.nanoTime();
                driver.map(va, rangeSize, bigHandle);
                long t4 = System.nanoTime();
                driver.setAccess(va, rangeSize);
                long t5 = System.nanoTime();
                driver.unmap(va, rangeSize);
                long t6 = System.nanoTime();
                if (timed) {
                    stitchedMap.add(t1 - t0);
                    stitchedAccess.add(t2 - t1);
                    stitchedUnmap.add(t3 - t2);
                    singleMap.add(t4 - t3);
                    singleAccess.add(t5 - t4);
                    singleUnmap.add(t6 - t5);
                }
            }
        } finally {
            if (bigHandle != 0) {
                driver.release(bigHandle);
            }
            for (int i = 0; i < created; i++) {
                driver.release(handles[i]);
            }
            driver.addressFree(va, rangeSize);
        }
    }

    private LatencySamples sample(String operation) {
        LatencySamples samples = new LatencySamples(operation, iterations);
        results.add(samples);
        return samples;
    }

    private void printTable() {
        int width = results.stream().mapToInt(r -> r.operation().length()).max().orElse(10);
        out.println();
        out.printf(Locale.ROOT, "%-" + width + "s %7s %11s %11s%n", "operation", "n", "median us", "p90 us");
        for (LatencySamples r : results) {
            out.printf(Locale.ROOT, "%-" + width + "s %7d %11.3f %11.3f%n",
                    r.operation(), r.count(), r.medianMicros(), r.p90Micros());
        }
    }
}
