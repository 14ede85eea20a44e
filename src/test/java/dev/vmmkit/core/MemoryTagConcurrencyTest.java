package dev.vmmkit.core;

import dev.vmmkit.core.MemoryTagPauseTest.Block;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.assertFullyIntact;
import static dev.vmmkit.core.AllocatorTestSupport.assertSampleIntact;
import static dev.vmmkit.core.AllocatorTestSupport.fill;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static dev.vmmkit.core.AllocatorTestSupport.randomSize;
import static dev.vmmkit.core.AllocatorTestSupport.smallConfig;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * One thread pauses and resumes a tag again and again while other threads allocate, fill, check
 * and free in other tags and untagged: neither side sees the other's bytes change, and the
 * paused tag's contents come back every time, with host memory pinned ahead for the kept tags
 * meanwhile or not.
 */
class MemoryTagConcurrencyTest {

    @ParameterizedTest(name = "pinning ahead: {0}")
    @ValueSource(booleans = {false, true})
    void pausingOneTagWhileOtherThreadsAllocateOtherTags(boolean pinAhead) throws Exception {
        HostDriver host = hostDriver(64 * MIB);
        try (VmmManager m = new VmmManager(host, smallConfig(64 * MIB))) {
            // On: the background thread pins for the kept tags while the workers allocate and the pauses run.
            if (pinAhead) m.usePinAhead(Long.MAX_VALUE);
            m.beginTagRegion("weights", true);
            List<Block> weights = MemoryTagPauseTest.allocateFilled(m, host, MemoryTagPauseTest.WEIGHTS, 900);
            m.endTagRegion();

            int workers = 3;
            CountDownLatch started = new CountDownLatch(workers);
            AtomicBoolean stop = new AtomicBoolean();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            List<Thread> threads = new ArrayList<>();
            for (int w = 0; w < workers; w++) {
                String tag = w == 0 ? null : "other" + w;
                long seedBase = 10_000L * (w + 1);
                Thread t = new Thread(() -> {
                    SplittableRandom rng = new SplittableRandom(seedBase);
                    List<Block> mine = new ArrayList<>();
                    try {
                        if (tag != null) m.beginTagRegion(tag, true);
                        started.countDown();
                        long seed = seedBase;
                        while (!stop.get() || mine.size() > 0) {
                            if (!stop.get() && (mine.size() < 20 && rng.nextBoolean())) {
                                long size = randomSize(rng, 1 * MIB);
                                long a = m.allocate(size, 0);
                                fill(host, a, size, ++seed);
                                mine.add(new Block(a, size, seed));
                            } else if (!mine.isEmpty()) {
                                Block b = mine.remove(rng.nextInt(mine.size()));
                                assertSampleIntact(host, b.address(), b.size(), b.seed(), "worker " + tag);
                                m.deallocate(b.address(), 0);
                            }
                        }
                        if (tag != null) m.endTagRegion();
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                        started.countDown();
                    }
                });
                threads.add(t);
                t.start();
            }
            started.await();
            for (int round = 0; round < 25 && failure.get() == null; round++) {
                m.pause("weights");
                m.resume("weights");
                for (Block b : weights) assertFullyIntact(host, b.address(), b.size(), b.seed(), "weights, round " + round);
            }
            stop.set(true);
            for (Thread t : threads) t.join();
            if (failure.get() != null) throw new AssertionError("a worker failed", failure.get());
            m.awaitPinAhead();
            m.freeKeptHostMemory();
            assertEquals(0, m.stats().tags().hostBytesPinned(), "every pinned chunk freed");
            TagStats.Tag w = m.stats().tags().tags().get(0);
            assertEquals(25, w.pauses());
            assertEquals(25, w.resumes());
            assertTrue(m.stats().tags().tags().size() == 3, "weights and two other tags");
            assertEquals(host.usage().aliveBytes(), m.stats().reservedBytes());
        } finally {
            host.close();
        }
    }
}
