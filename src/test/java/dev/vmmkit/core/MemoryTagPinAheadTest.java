package dev.vmmkit.core;

import dev.vmmkit.core.MemoryTagPauseTest.Block;
import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.FaultInjectingDriver;
import dev.vmmkit.driver.FaultPlan;
import dev.vmmkit.driver.ForwardingDriver;
import dev.vmmkit.driver.ForwardingTransfers;
import dev.vmmkit.driver.HostTransfers;
import dev.vmmkit.driver.VmmDriver;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

import static dev.vmmkit.core.AllocatorTestSupport.KIB;
import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.assertFullyIntact;
import static dev.vmmkit.core.AllocatorTestSupport.fill;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static dev.vmmkit.core.AllocatorTestSupport.smallConfig;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Pinning ahead: host memory for a tag that keeps its contents is pinned in the background while
 * the tag is allocated, so that its first pause pins nothing; the pause stays correct when that
 * work has not finished or failed, and the figures of pinned host memory equal what the driver
 * pinned.
 */
class MemoryTagPinAheadTest {
    private static final long UNLIMITED = Long.MAX_VALUE;

    /** Host transfers that count the pinned bytes held, and can hold one pin until released. */
    static final class WatchedDriver extends ForwardingDriver {
        final ConcurrentHashMap<Long, Long> pinned = new ConcurrentHashMap<>();
        final AtomicLong pins = new AtomicLong();
        volatile CountDownLatch holdNextPin;
        final CountDownLatch pinHeld = new CountDownLatch(1);
        volatile boolean failHeldPin;
        private final HostTransfers transfers = new ForwardingTransfers(delegate.transfers()) {
            @Override
            public long allocatePinned(long bytes) {
                pins.incrementAndGet();
                CountDownLatch hold = holdNextPin;
                if (hold != null) {
                    holdNextPin = null;
                    pinHeld.countDown();
                    try {
                        hold.await();
                    } catch (InterruptedException e) {
                        throw new IllegalStateException(e);
                    }
                    if (failHeldPin) throw new DriverException(CudaResult.OUT_OF_MEMORY, "out of memory", "cuMemHostAlloc (held, then failed)");
                }
                long address = super.allocatePinned(bytes);
                pinned.put(address, bytes);
                return address;
            }

            @Override
            public void freePinned(long address) {
                super.freePinned(address);
                pinned.remove(address);
            }
        };

        WatchedDriver(VmmDriver delegate) {
            super(delegate);
        }

        @Override
        public HostTransfers transfers() {
            return transfers;
        }

        long pinnedBytes() {
            long sum = 0;
            for (long b : pinned.values()) sum += b;
            return sum;
        }
    }

    private static List<Block> allocateWeights(VmmManager m, HostDriver host, long[] sizes, long seed) {
        m.beginTagRegion("weights", true);
        try {
            return MemoryTagPauseTest.allocateFilled(m, host, sizes, seed);
        } finally {
            m.endTagRegion();
        }
    }

    private static long keptBytes(List<Block> blocks) {
        long sum = 0;
        for (Block b : blocks) sum += b.size();
        return sum;
    }

    private static void assertIntact(HostDriver host, List<Block> blocks, String note) {
        for (Block b : blocks) assertFullyIntact(host, b.address(), b.size(), b.seed(), note);
    }

    @Test
    void theFirstPauseOfAKeptTagPinsNothingWhenPinningAheadHasFinished() throws Exception {
        HostDriver host = hostDriver(64 * MIB);
        WatchedDriver driver = new WatchedDriver(host);
        try (VmmManager m = new VmmManager(driver, smallConfig(64 * MIB))) {
            m.usePinAhead(UNLIMITED);
            List<Block> weights = allocateWeights(m, host, MemoryTagPauseTest.WEIGHTS, 10);
            m.beginTagRegion("kv_cache", false);
            MemoryTagPauseTest.allocateFilled(m, host, MemoryTagPauseTest.KV, 20);
            m.endTagRegion();
            m.awaitPinAhead();
            TagStats ready = m.stats().tags();
            assertTrue(ready.hostBytesKept() >= keptBytes(weights), "pinned ahead: " + ready);
            assertEquals(driver.pinnedBytes(), ready.hostBytesPinned(), "pinned host memory equals the driver's");
            assertEquals(ready.hostBytesPinned(), ready.hostBytesPinnedAhead(), "all of it pinned ahead");
            assertEquals(ready.hostBytesPinned(), m.hostBytesPinned(), "the figure a program polls, without the rest");
            assertEquals(ready.hostBytesKept(), m.hostBytesKept(), "the figure a program polls, without the rest");

            long pinsBefore = driver.pins.get();
            m.pause(null);
            assertEquals(pinsBefore, driver.pins.get(), "the first pause pins nothing");
            assertEquals(driver.pinnedBytes(), m.stats().tags().hostBytesPinned());
            m.resume(null);
            assertIntact(host, weights, "weights after the first cycle");
            m.freeKeptHostMemory();
            assertEquals(0, driver.pinnedBytes(), "freed on request");
            assertEquals(0, m.stats().tags().hostBytesPinned());
            assertEquals(0, m.hostBytesPinned());
            assertEquals(0, m.hostBytesKept());
        }
        assertEquals(0, driver.pinnedBytes(), "nothing pinned after close");
    }

    /** Pinning host memory beside a CUDA-graph capture would disturb it: pinning ahead waits for the capture's end. */
    @Test
    void nothingIsPinnedAheadWhileAStreamCaptureIsUnderWay() throws Exception {
        HostDriver host = hostDriver(64 * MIB);
        WatchedDriver driver = new WatchedDriver(host);
        try (VmmManager m = new VmmManager(driver, smallConfig(64 * MIB))) {
            m.usePinAhead(UNLIMITED);
            StreamCaptures captures = m.streamCaptures();
            captures.beginning();
            List<Block> weights = allocateWeights(m, host, new long[]{3 * MIB, 1 * MIB + 9}, 50);
            while (captures.waiting() == 0) Thread.onSpinWait(); // the pin-ahead thread waits for the capture's end
            assertEquals(0, driver.pins.get(), "nothing pinned during the capture");
            captures.ended();
            m.awaitPinAhead();
            assertTrue(m.stats().tags().hostBytesKept() >= keptBytes(weights), "pinned once the capture ended");
            m.pause("weights");
            m.resume("weights");
            assertIntact(host, weights, "weights");
        }
    }

    /**
     * A capture that begins while pinning ahead is under way waits for the chunk being pinned, not
     * for every chunk still to come: no chunk starts while a capture waits to begin.
     */
    @Test
    void aCaptureWaitsForTheChunkBeingPinnedAheadOnly() throws Exception {
        HostDriver host = hostDriver(64 * MIB);
        WatchedDriver driver = new WatchedDriver(host);
        try (VmmManager m = new VmmManager(driver, smallConfig(64 * MIB))) {
            CountDownLatch release = new CountDownLatch(1);
            driver.holdNextPin = release;
            m.usePinAhead(UNLIMITED);
            List<Block> weights = new ArrayList<>(allocateWeights(m, host, new long[]{1 * MIB}, 60));
            driver.pinHeld.await(); // the first chunk is being pinned, held
            weights.addAll(allocateWeights(m, host, new long[]{20 * MIB}, 61)); // more than that chunk holds
            StreamCaptures captures = m.streamCaptures();
            Thread capturing = new Thread(captures::beginning, "capturing");
            capturing.start();
            while (captures.waitingToBegin() == 0) Thread.onSpinWait();
            release.countDown();
            capturing.join();
            assertTrue(captures.underway());
            assertEquals(1, driver.pins.get(), "the capture began after the chunk in progress, before any other");
            captures.ended();
            m.awaitPinAhead();
            assertTrue(driver.pins.get() >= 2 && m.stats().tags().hostBytesKept() >= keptBytes(weights),
                    "pinned the rest once the capture ended: " + m.stats().tags());
            m.pause("weights");
            m.resume("weights");
            assertIntact(host, weights, "weights");
        }
    }

    @Test
    void theLimitBoundsWhatIsPinnedAheadAndThePausePinsTheRest() throws Exception {
        HostDriver host = hostDriver(64 * MIB);
        WatchedDriver driver = new WatchedDriver(host);
        try (VmmManager m = new VmmManager(driver, smallConfig(64 * MIB))) {
            long limit = 1 * MIB;
            m.usePinAhead(limit);
            List<Block> weights = allocateWeights(m, host, new long[]{3 * MIB, 2 * MIB + 5, 700 * KIB}, 30);
            m.awaitPinAhead();
            long ahead = m.stats().tags().hostBytesPinned();
            assertTrue(ahead > 0 && ahead <= limit, "pinned ahead within the limit: " + ahead);
            long pinsBefore = driver.pins.get();
            m.pause("weights");
            assertTrue(driver.pins.get() > pinsBefore, "the pause pinned what was missing");
            m.resume("weights");
            assertIntact(host, weights, "weights");
        }
    }

    @Test
    void aPauseTakesAChunkStillBeingPinnedAheadOrPinsItsOwnWhenThatFails() throws Exception {
        for (boolean fails : new boolean[]{false, true}) {
            HostDriver host = hostDriver(64 * MIB);
            WatchedDriver driver = new WatchedDriver(host);
            try (VmmManager m = new VmmManager(driver, smallConfig(64 * MIB))) {
                CountDownLatch release = new CountDownLatch(1);
                driver.failHeldPin = fails;
                driver.holdNextPin = release;
                m.usePinAhead(UNLIMITED);
                List<Block> weights = allocateWeights(m, host, new long[]{1 * MIB + 7}, 40);
                driver.pinHeld.await(); // the background thread is pinning the chunk now
                CompletableFuture<Void> pause = CompletableFuture.runAsync(() -> m.pause("weights"));
                release.countDown();
                pause.get();
                m.resume("weights");
                assertIntact(host, weights, "weights, the chunk pinned ahead " + (fails ? "failed" : "landed"));
                m.awaitPinAhead();
                assertEquals(driver.pinnedBytes(), m.stats().tags().hostBytesPinned(), "figures equal the driver's");
                assertEquals(fails ? 2 : 1, driver.pins.get(), "one chunk pinned ahead, and one by the pause after a failure");
            }
            assertEquals(0, driver.pinnedBytes(), "nothing pinned after close");
        }
    }

    @Test
    void aFailureToPinAheadLeavesThePauseToPinItself() throws Exception {
        HostDriver host = hostDriver(64 * MIB);
        FaultPlan plan = new FaultPlan(1);
        WatchedDriver driver = new WatchedDriver(new FaultInjectingDriver(host, plan));
        try (VmmManager m = new VmmManager(driver, smallConfig(64 * MIB))) {
            // Every pin fails while the weights are allocated: an allocation made after a failed round
            // may start another (that is the retry), so the count of failed rounds is not fixed.
            plan.failAlways(DriverCall.PINNED_ALLOCATE, CudaResult.OUT_OF_MEMORY);
            m.usePinAhead(UNLIMITED);
            List<Block> weights = allocateWeights(m, host, new long[]{2 * MIB}, 50);
            m.awaitPinAhead();
            assertTrue(plan.injected(DriverCall.PINNED_ALLOCATE) >= 1);
            assertEquals(0, m.stats().tags().hostBytesPinned(), "nothing pinned after the failure");
            plan.clear(DriverCall.PINNED_ALLOCATE);
            m.pause("weights");
            m.resume("weights");
            assertIntact(host, weights, "weights");
            // The next allocation tries again.
            List<Block> more = allocateWeights(m, host, new long[]{1 * MIB}, 60);
            m.awaitPinAhead();
            assertTrue(m.stats().tags().hostBytesKept() >= keptBytes(weights) + keptBytes(more), m.stats().tags().toString());
        }
    }

    /**
     * A reference model of the pinned host memory held: random allocations into a kept and a
     * discarded tag, frees, pauses, resumes and frees of the kept chunks, while pinning ahead runs;
     * after each step the figures equal the driver's, and the kept tag's bytes come back intact.
     */
    @Test
    void pinnedHostMemoryFiguresFollowTheDriverThroughRandomOperations() throws Exception {
        for (long seed = 1; seed <= 4; seed++) {
            SplittableRandom rng = new SplittableRandom(seed);
            HostDriver host = hostDriver(64 * MIB);
            WatchedDriver driver = new WatchedDriver(host);
            try (VmmManager m = new VmmManager(driver, smallConfig(64 * MIB))) {
                m.usePinAhead(seed % 2 == 0 ? UNLIMITED : 2 * MIB);
                List<Block> kept = new ArrayList<>();
                List<Block> discarded = new ArrayList<>();
                boolean paused = false;
                for (int step = 0; step < 60; step++) {
                    int op = rng.nextInt(6);
                    String note = "seed " + seed + " step " + step + " op " + op;
                    if (op <= 1 && !paused) {
                        boolean keep = op == 0;
                        long size = 1 + rng.nextLong(keep ? 900 * KIB : 2 * MIB);
                        m.beginTagRegion(keep ? "weights" : "kv_cache", keep);
                        long a = m.allocate(size, 0);
                        m.endTagRegion();
                        fill(host, a, size, seed * 1000 + step);
                        (keep ? kept : discarded).add(new Block(a, size, seed * 1000 + step));
                    } else if (op == 2 && !kept.isEmpty()) {
                        Block b = kept.remove(rng.nextInt(kept.size()));
                        m.deallocate(b.address(), 0);
                    } else if (op == 3 && !paused && m.knowsTag("weights")) {
                        m.pause(null);
                        paused = true;
                    } else if (op == 4 && paused) {
                        m.resume(null);
                        paused = false;
                        assertIntact(host, kept, note);
                    } else if (op == 5) {
                        m.freeKeptHostMemory();
                    }
                    m.awaitPinAhead();
                    assertEquals(driver.pinnedBytes(), m.stats().tags().hostBytesPinned(), note + ": pinned figures");
                }
                if (paused) m.resume(null);
                assertIntact(host, kept, "seed " + seed + " at the end");
            }
            assertEquals(0, driver.pinnedBytes(), "seed " + seed + ": nothing pinned after close");
        }
    }
}
