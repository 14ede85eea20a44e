package dev.vmmkit.core;

import dev.vmmkit.driver.ForwardingDriver;
import dev.vmmkit.driver.VmmDriver;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.locks.LockSupport;

import static dev.vmmkit.core.AllocatorTestSupport.PAGE;
import static dev.vmmkit.core.AllocatorTestSupport.assertFullyIntact;
import static dev.vmmkit.core.AllocatorTestSupport.assertSampleIntact;
import static dev.vmmkit.core.AllocatorTestSupport.fill;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static dev.vmmkit.core.AllocatorTestSupport.randomSize;
import static dev.vmmkit.core.AllocatorTestSupport.smallConfig;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Thread stress with slow driver calls, so slow paths run without the lock while other threads
 * free, promote, hit the cache and drain next to the blocks in flight. Each thread fills its
 * allocations with its own pattern and checks them before freeing: two live allocations sharing
 * memory, or memory unmapped under a live one, breaks a pattern or faults the access check.
 */
class VmmManagerConcurrencyTest {
    private static final int THREADS = 6;
    private static final int OPS = 1500;
    private static final long[] STREAMS = {0, 1, 2, VmmManager.DEVICE_WIDE_STREAM};

    /** Sleeps a few microseconds in the calls that change mappings, so other threads run meanwhile. */
    private static final class SlowDriver extends ForwardingDriver {
        SlowDriver(VmmDriver delegate) {
            super(delegate);
        }

        @Override
        public void map(long va, long size, long handle) {
            LockSupport.parkNanos(20_000);
            super.map(va, size, handle);
        }

        @Override
        public void unmap(long va, long size) {
            LockSupport.parkNanos(20_000);
            super.unmap(va, size);
        }

        @Override
        public long create(long size, boolean exportable) {
            LockSupport.parkNanos(10_000);
            return super.create(size, exportable);
        }

        @Override
        public void close() {
        }
    }

    @Test
    void threadsAllocatingFreeingAndDrainingNeverShareOrLoseMemory() throws Exception {
        HostDriver host = hostDriver(64L << 20);
        try {
            VmmConfig config = smallConfig(64L << 20).withReserveSlack(1.0);
            VmmManager m = new VmmManager(new SlowDriver(host), config);
            ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
            CountDownLatch start = new CountDownLatch(1);
            List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < THREADS; t++) {
                long seed = 9000 + t;
                threads.add(Thread.ofPlatform().start(() -> {
                    try {
                        start.await();
                        work(m, host, seed);
                    } catch (Throwable e) {
                        failures.add(e);
                    }
                }));
            }
            start.countDown();
            for (Thread t : threads) t.join();
            if (!failures.isEmpty()) throw new AssertionError("a thread failed", failures.peek());
            AllocatorStats s = m.stats();
            assertEquals(0, s.liveBytes(), "every thread freed what it allocated: " + s);
            assertEquals(s.allocations(), s.frees());
            assertEquals(host.usage().aliveBytes(), s.reservedBytes(), "the figures equal the driver's");
            m.close();
            assertTrue(host.usage().isEmpty(), "after close the driver holds nothing: " + host.usage());
        } finally {
            host.close();
        }
    }

    private static void work(VmmManager m, HostDriver host, long seed) {
        SplittableRandom rng = new SplittableRandom(seed);
        List<long[]> live = new ArrayList<>(); // address, size, pattern seed, stream
        for (int op = 0; op < OPS; op++) {
            String ctx = "seed " + seed + " op " + op;
            int dice = rng.nextInt(100);
            if (dice < 52 || live.isEmpty()) {
                long size = rng.nextInt(10) == 0 ? 1 + rng.nextLong(6 * PAGE) : randomSize(rng, Long.MAX_VALUE);
                long stream = STREAMS[rng.nextInt(STREAMS.length)];
                long address = m.allocate(size, stream);
                long pattern = rng.nextLong();
                fill(host, address, size, pattern, ctx);
                live.add(new long[]{address, size, pattern, stream});
            } else if (dice < 97) {
                long[] victim = live.remove(rng.nextInt(live.size()));
                assertFullyIntact(host, victim[0], victim[1], victim[2], ctx + " (at free)");
                m.deallocate(victim[0], victim[3]);
            } else {
                m.drain();
            }
            if (op % 50 == 0) {
                for (long[] l : live) assertSampleIntact(host, l[0], l[1], l[2], ctx);
            }
        }
        for (long[] l : live) {
            assertFullyIntact(host, l[0], l[1], l[2], "seed " + seed + " end");
            m.deallocate(l[0], l[3]);
        }
    }
}
