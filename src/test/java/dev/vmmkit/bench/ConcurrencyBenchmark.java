package dev.vmmkit.bench;

import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.ForwardingDriver;
import dev.vmmkit.driver.VmmDriver;
import dev.vmmkit.driver.host.HostDriver;
import dev.vmmkit.tools.Percentiles;

import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;

/**
 * Eight threads share one manager and one size class. Seven free and allocate sizes that the cache
 * already holds (no driver call), pausing {@value #THINK_MICROS} us between pairs as a program does
 * between kernels, so they measure waiting rather than compete for CPU; the eighth keeps forcing
 * the slow path: it allocates new memory, frees it and drains it, over and over. The driver sleeps
 * on every virtual-memory call, so the slow path is about as slow as on a GPU (GPU-FACTS: 6-17 us
 * per call per handle).
 *
 * <p>Prints the throughput of the seven cache-hit threads, the latency of their free+allocate
 * pairs, and how many stalled (took longer than {@value #STALL_MICROS} us): the figures a lock held
 * across driver calls spoils. Printed, not asserted. Run with
 * {@code scripts/bench-concurrency.sh [seconds] [delay-us]}.
 */
public final class ConcurrencyBenchmark {
    static final int CACHE_HIT_THREADS = 7;
    static final long STALL_MICROS = 200;
    static final long THINK_MICROS = 20;
    static final long MIB = 1L << 20;

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 5;
        long delayMicros = args.length > 1 ? Long.parseLong(args[1]) : 30;
        try (HostDriver host = HostDriver.builder().capacity(256L << 30).build();
             VmmDriver slow = new SlowDriver(host, delayMicros * 1000)) {
            // Warm-up run (JIT), then the measured one, each on a fresh manager.
            run(slow, Math.min(1.0, seconds / 3), delayMicros, false);
            run(slow, seconds, delayMicros, true);
        }
    }

    private static void run(VmmDriver driver, double seconds, long delayMicros, boolean print) throws Exception {
        // smallLimit 1 MiB: every size below lives in the large region, so all eight threads share its lock.
        VmmManager manager = new VmmManager(driver, VmmConfig.DEFAULTS.withAddressSpaceBytes(64L << 30));
        AtomicBoolean stop = new AtomicBoolean();
        long[] ops = new long[CACHE_HIT_THREADS];
        long[] stalls = new long[CACHE_HIT_THREADS];
        long[] worst = new long[CACHE_HIT_THREADS];
        long[] growerOps = new long[1];
        long[][] samples = new long[CACHE_HIT_THREADS][2_000_000];
        CountDownLatch ready = new CountDownLatch(CACHE_HIT_THREADS + 1);
        CountDownLatch go = new CountDownLatch(1);
        Thread[] threads = new Thread[CACHE_HIT_THREADS + 1];
        for (int t = 0; t < CACHE_HIT_THREADS; t++) {
            int me = t;
            threads[t] = Thread.ofPlatform().name("cache-hit-" + t).start(() -> {
                // Each thread cycles through a few sizes it keeps mapped: after the first round, hits only.
                long[] held = new long[8];
                long[] sizes = {2 * MIB, 3 * MIB, 2 * MIB + 512 * 1024, 4 * MIB};
                for (int i = 0; i < held.length; i++) held[i] = manager.allocate(sizes[i & 3], me + 1);
                ready.countDown();
                await(go);
                long n = 0;
                long stalled = 0;
                long longest = 0;
                for (int i = 0; !stop.get(); i++) {
                    int slot = i & (held.length - 1);
                    long t0 = System.nanoTime();
                    manager.deallocate(held[slot], me + 1);
                    held[slot] = manager.allocate(sizes[(i + slot) & 3], me + 1);
                    long took = System.nanoTime() - t0;
                    if (took > STALL_MICROS * 1000) stalled++;
                    longest = Math.max(longest, took);
                    if (samples[me].length > (int) (n / 2)) samples[me][(int) (n / 2)] = took;
                    n += 2;
                    LockSupport.parkNanos(THINK_MICROS * 1000);
                }
                ops[me] = n;
                stalls[me] = stalled;
                worst[me] = longest;
            });
        }
        threads[CACHE_HIT_THREADS] = Thread.ofPlatform().name("grower").start(() -> {
            ready.countDown();
            await(go);
            long[] held = new long[32];
            long n = 0;
            while (!stop.get()) {
                // New memory: 32 allocations of 4 MiB, each placed on unmapped space (create, map, setAccess).
                for (int i = 0; i < held.length; i++) held[i] = manager.allocate(4 * MIB + 4096, 100);
                for (long a : held) manager.deallocate(a, 100);
                manager.drain(); // gives it back (unmap, release), so the next round grows again
                n += 2L * held.length;
            }
            growerOps[0] = n;
        });
        ready.await();
        long start = System.nanoTime();
        go.countDown();
        Thread.sleep((long) (seconds * 1000));
        stop.set(true);
        for (Thread t : threads) t.join();
        double elapsed = (System.nanoTime() - start) / 1e9;
        var stats = manager.stats();
        manager.close();
        if (!print) return;
        long total = Arrays.stream(ops).sum();
        long stalled = Arrays.stream(stalls).sum();
        long longest = Arrays.stream(worst).max().orElse(0);
        long[] all = new long[(int) Math.min(Integer.MAX_VALUE - 8, total / 2)];
        int count = 0;
        for (int t = 0; t < CACHE_HIT_THREADS; t++) {
            int k = (int) Math.min(samples[t].length, ops[t] / 2);
            System.arraycopy(samples[t], 0, all, count, Math.min(k, all.length - count));
            count += Math.min(k, all.length - count);
        }
        Percentiles.sort(all, count);
        System.out.printf(Locale.ROOT, "concurrency: 7 cache-hit threads + 1 growing thread, driver delay %d us per call, %.1f s%n",
                delayMicros, elapsed);
        System.out.printf(Locale.ROOT, "cache-hit threads: %,.0f ops/s in all (%,.0f per thread), %d of %,d ops stalled > %d us (%.3f%%), longest %.2f ms%n",
                total / elapsed, total / elapsed / CACHE_HIT_THREADS, stalled, total / 2, STALL_MICROS,
                100.0 * stalled / Math.max(1, total / 2), longest / 1e6);
        System.out.printf(Locale.ROOT, "cache-hit free+allocate pair: p50 %.2f us, p99 %.2f us, p99.9 %.2f us%n",
                Percentiles.nearestRank(all, count, 0.5) / 1e3, Percentiles.nearestRank(all, count, 0.99) / 1e3,
                Percentiles.nearestRank(all, count, 0.999) / 1e3);
        System.out.printf(Locale.ROOT, "growing thread: %,.0f ops/s; driver calls: %s%n", growerOps[0] / elapsed,
                stats.driverCalls());
    }

    private static void await(CountDownLatch latch) {
        try {
            latch.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Sleeps {@code delayNanos} in every virtual-memory call, as a GPU driver takes that long. */
    static final class SlowDriver extends ForwardingDriver {
        private final long delayNanos;

        SlowDriver(VmmDriver delegate, long delayNanos) {
            super(delegate);
            this.delayNanos = delayNanos;
        }

        private void pause() {
            long until = System.nanoTime() + delayNanos;
            // parkNanos, not a busy spin: the delay should cost time, not the CPU the other threads need.
            while (System.nanoTime() < until) LockSupport.parkNanos(until - System.nanoTime());
        }

        @Override
        public long create(long size, boolean exportable) {
            pause();
            return super.create(size, exportable);
        }

        @Override
        public void release(long handle) {
            pause();
            super.release(handle);
        }

        @Override
        public void map(long va, long size, long handle) {
            pause();
            super.map(va, size, handle);
        }

        @Override
        public void setAccess(long va, long size) {
            pause();
            super.setAccess(va, size);
        }

        @Override
        public void unmap(long va, long size) {
            pause();
            super.unmap(va, size);
        }

        @Override
        public void close() {
            // The benchmark closes the host driver itself.
        }
    }
}
