package dev.vmmkit.bench;

import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.host.HostDriver;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

import java.util.concurrent.TimeUnit;

/**
 * The hot path: allocate and free sizes that fit memory the manager already has mapped, so no
 * driver function is called. Run with {@code scripts/bench-hotpath.sh}.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class HotPathBenchmark {

    @Param({"512", "65536", "4194304"})
    public long size;

    private HostDriver driver;
    private VmmManager manager;
    private final long[] held = new long[64];
    private int next;

    @Setup(Level.Trial)
    public void setUp() {
        driver = HostDriver.builder().build();
        manager = new VmmManager(driver, VmmConfig.DEFAULTS);
        // Keep some neighbours live so frees coalesce and allocations split, as in a real trace.
        for (int i = 0; i < held.length; i++) held[i] = manager.allocate(size + 512L * (i % 7), 0);
        for (int i = 0; i < held.length; i += 2) {
            manager.deallocate(held[i], 0);
            held[i] = 0;
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        manager.close();
        driver.close();
    }

    /** One allocate and one free of a cached size. */
    @Benchmark
    public long allocateThenFree() {
        long address = manager.allocate(size, 0);
        manager.deallocate(address, 0);
        return address;
    }

    /** Allocation and free interleaved with a sliding window of live blocks. */
    @Benchmark
    public long slidingWindow() {
        int i = next++ & (held.length - 1);
        if (held[i] != 0) manager.deallocate(held[i], 0);
        held[i] = manager.allocate(size + 512L * (i % 5), 0);
        return held[i];
    }
}
