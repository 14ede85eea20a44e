package dev.vmmkit.bench;

import dev.vmmkit.core.AllocatorStats;
import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.BeforeDeviceSyncDriver;
import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.DryDriver;
import dev.vmmkit.driver.VmmDriver;

import java.util.Arrays;
import java.util.Locale;

/**
 * The cudaMalloc + cudaFree pair of one size (freed device-wide, as cudaFree frees) on a manager
 * over a driver with no device ({@link DryDriver}) whose device synchronisation takes as long as a
 * GPU's (a busy wait, as the CUDA driver spins by default): what bench_pair.c measures through the
 * shim, without the shim. Prints, per size, the pair's median and p99 (one pair per sample), the
 * batched mean, cache hits and misses per pair, device synchronisations per pair and the handles
 * the loop created (the blocks it rotates over).
 *
 * <p>Usage: {@code scripts/run-test-class.sh dev.vmmkit.bench.PairBenchmark [SYNC_NS [PAIRS [SIZE...]]]}
 * (defaults: 1500 ns per synchronisation, 200,000 pairs, 4 KiB, 2 MiB and 64 MiB).
 */
public final class PairBenchmark {
    private PairBenchmark() {
    }

    public static void main(String[] args) {
        long syncNanos = args.length > 0 ? Long.parseLong(args[0]) : 1500;
        int pairs = args.length > 1 ? Integer.parseInt(args[1]) : 200_000;
        long[] sizes = args.length > 2
                ? Arrays.stream(args, 2, args.length).mapToLong(Long::parseLong).toArray()
                : new long[] {4096, 2L << 20, 64L << 20};
        System.out.printf(Locale.ROOT, "pair | device sync %d ns | %d pairs per size%n", syncNanos, pairs);
        System.out.println("pair | size | median ns | p99 ns | batched ns | misses/pair | syncs/pair | handles created");
        for (long size : sizes) run(size, syncNanos, pairs);
    }

    private static void run(long size, long syncNanos, int pairs) {
        VmmDriver driver = slowSynchronisations(new DryDriver(2L << 20, 80L << 30), syncNanos);
        VmmManager m = new VmmManager(driver, VmmConfig.DEFAULTS);
        long wide = DeviceMemoryResource.DEVICE_WIDE_STREAM;
        for (int i = 0; i < pairs; i++) m.deallocate(m.allocate(size, wide), wide); // warm-up
        AllocatorStats before = m.stats();
        long[] single = new long[pairs];
        for (int i = 0; i < pairs; i++) {
            long t = System.nanoTime();
            m.deallocate(m.allocate(size, wide), wide);
            single[i] = System.nanoTime() - t;
        }
        long t = System.nanoTime();
        for (int i = 0; i < pairs; i++) m.deallocate(m.allocate(size, wide), wide);
        double batched = (System.nanoTime() - t) / (double) pairs;
        AllocatorStats after = m.stats();
        Arrays.sort(single);
        long measured = 2L * pairs;
        double misses = (after.cacheMisses() - before.cacheMisses()) / (double) measured; // per pair: 2 passes
        double syncs = (count(after, DriverCall.DEVICE_SYNCHRONIZE) - count(before, DriverCall.DEVICE_SYNCHRONIZE))
                / (double) measured;
        System.out.printf(Locale.ROOT, "pair | %d | %d | %d | %.0f | %.3f | %.3f | %d%n", size, single[pairs / 2],
                single[(int) (pairs * 0.99)], batched, misses, syncs,
                after.driverHandles().handles(DriverCall.CREATE));
        m.close();
    }

    private static long count(AllocatorStats stats, DriverCall call) {
        Long n = stats.driverCalls().get(call);
        return n == null ? 0 : n;
    }

    /** Device synchronisations take {@code syncNanos}, busy, as cuCtxSynchronize spins on a GPU. */
    private static VmmDriver slowSynchronisations(VmmDriver delegate, long syncNanos) {
        return new BeforeDeviceSyncDriver(delegate, () -> {
            long until = System.nanoTime() + syncNanos;
            while (System.nanoTime() - until < 0) Thread.onSpinWait();
        });
    }
}
