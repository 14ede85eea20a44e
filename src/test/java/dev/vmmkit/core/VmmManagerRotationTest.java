package dev.vmmkit.core;

import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.FaultInjectingDriver;
import dev.vmmkit.driver.FaultPlan;
import dev.vmmkit.driver.VmmDriver;
import dev.vmmkit.driver.host.HostDriver;
import dev.vmmkit.driver.host.HostEvents;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;

import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.PAGE;
import static dev.vmmkit.core.AllocatorTestSupport.assertFullyIntact;
import static dev.vmmkit.core.AllocatorTestSupport.fill;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static dev.vmmkit.core.AllocatorTestSupport.smallConfig;
import static dev.vmmkit.core.DeviceSyncGate.fenceThreadsSince;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A same-size cudaMalloc/cudaFree loop while its frees wait for device synchronisations: it rotates
 * over up to {@link SlowPath#ROTATION_BLOCKS} blocks instead of waiting, each free asks for its
 * synchronisation itself, and no block is handed out before a synchronisation that started after
 * its free has finished. Synchronisations are held at a gate and let through one by one.
 */
class VmmManagerRotationTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(30);
    private static final long DEVICE_WIDE = VmmManager.DEVICE_WIDE_STREAM;
    private static final long SIZE = 24 * PAGE; // large region

    private final Set<Thread> fenceThreadsBefore = fenceThreadsSince(Set.of());
    private final DeviceSyncGate gate = new DeviceSyncGate();
    private HostDriver host;
    private HostEvents events;
    private VmmManager m;

    private void open(java.util.function.UnaryOperator<VmmDriver> wrap) {
        host = hostDriver(64 * MIB);
        events = host.hostEvents();
        events.holdCompletion(true); // stream events: a busy device
        m = new VmmManager(new DeviceSyncGatedDriver(wrap.apply(host), gate), smallConfig(256 * MIB));
    }

    @AfterEach
    void closeAndCheckNothingLeaks() {
        gate.openAndCloseCleanly(m, host, fenceThreadsBefore);
    }

    private long creates() {
        return m.stats().driverHandles().handles(DriverCall.CREATE);
    }

    /** A block of {@code size} freed device-wide, its synchronisation under way and held at the gate: the device is busy. */
    private long freedWhileTheDeviceIsBusy(long size) throws InterruptedException {
        long address = m.allocate(size, DEVICE_WIDE);
        m.deallocate(address, DEVICE_WIDE);
        gate.awaitArrivals(1);
        return address;
    }

    private static boolean overlaps(long a, long b) {
        return a < b + SIZE && b < a + SIZE;
    }

    @Test
    void theLoopRotatesOverUpToEightBlocksAndReusesEachOnlyAfterItsSynchronisation() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            open(driver -> driver);
            List<Long> blocks = new ArrayList<>();
            for (int turn = 0; turn <= SlowPath.ROTATION_BLOCKS; turn++) {
                long p = m.allocate(SIZE, DEVICE_WIDE);
                for (long earlier : blocks) assertFalse(overlaps(earlier, p), "turn " + turn + ": a waiting block was handed out");
                fill(host, p, SIZE, turn + 1);
                blocks.add(p);
                m.deallocate(p, DEVICE_WIDE);
                if (turn == 0) gate.awaitArrivals(1); // the first free's synchronisation is under way, held
            }
            assertEquals(SlowPath.ROTATION_BLOCKS + 1, blocks.size());
            long made = creates();
            assertTrue(m.stats().reservedBytes() >= (SlowPath.ROTATION_BLOCKS + 1) * SIZE, "new memory for every block");
            for (int i = 0; i < blocks.size(); i++) {
                assertFullyIntact(host, blocks.get(i), SIZE, i + 1, "block " + i + " waits untouched");
            }

            // The first synchronisation started after block 0's free only: it frees block 0 alone.
            DeviceWideFence fence = m.deviceWideFence();
            gate.letThrough(1);
            fence.await(1);
            gate.awaitArrivals(2); // the second (for the other blocks' frees) is under way, held
            long again = m.allocate(SIZE, DEVICE_WIDE);
            assertEquals(blocks.get(0), again, "block 0, whose synchronisation finished");
            m.deallocate(again, DEVICE_WIDE); // needs a third synchronisation

            gate.letThrough(1);
            fence.await(2);
            long next = m.allocate(SIZE, DEVICE_WIDE);
            assertTrue(blocks.subList(1, blocks.size()).contains(next), "one of the blocks the second synchronisation covered");
            assertEquals(made, creates(), "no new block once one is reusable");
            m.deallocate(next, DEVICE_WIDE);
        });
    }

    @Test
    void onlyBlocksOfTheRequestsSizeAreCounted() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            open(driver -> driver);
            long big = freedWhileTheDeviceIsBusy(4 * SIZE);
            // The large waiting block is not counted for a smaller request: that request does not get
            // a second copy of the program's memory; it waits (at most SlowPath.PENDING_FREE_WAIT_NANOS,
            // the gate stays shut), then goes beside it.
            long small = m.allocate(SIZE, DEVICE_WIDE);
            assertFalse(small < big + 4 * SIZE && big < small + SIZE, "the waiting block was not handed out");
            m.deallocate(small, DEVICE_WIDE);
        });
    }

    @Test
    void aBlockLargerThanTheRotationsBoundGetsNoCopyAndTheNextRequestWaitsForIt() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            long large = SlowPath.ROTATION_BYTES + 4 * PAGE;
            host = hostDriver(2 * large);
            events = host.hostEvents();
            m = new VmmManager(new DeviceSyncGatedDriver(host, gate), smallConfig(4 * large));
            long first = m.allocate(large, DEVICE_WIDE);
            fill(host, first, PAGE, 7);
            m.deallocate(first, DEVICE_WIDE);
            gate.awaitArrivals(1); // its synchronisation is under way, held: the device is busy

            long[] again = new long[1];
            Thread request = Thread.ofPlatform().start(() -> again[0] = m.allocate(large, DEVICE_WIDE));
            awaitWaitingForPendingFrees(request);
            assertEquals(1, creates(), "no copy of the large block while its free waits");
            gate.letThrough(1);
            request.join();
            assertEquals(first, again[0], "the same block, once its synchronisation finished");
            assertEquals(1, creates());
            m.deallocate(again[0], DEVICE_WIDE);
        });
    }

    @Test
    void aRequestThatDoesNotFollowAFreeOfItsSizeGetsNoCopyButWaits() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            open(driver -> driver);
            long first = freedWhileTheDeviceIsBusy(SIZE);
            // Another size between the free and the next request: not a loop's turn. It passes the
            // budget, waits its bound for the held synchronisation, and gets memory of its own.
            long between = m.allocate(SIZE - 7 * PAGE, DEVICE_WIDE);
            long handlesBefore = creates();

            Thread request = Thread.ofPlatform().start(() -> m.deallocate(m.allocate(SIZE, DEVICE_WIDE), DEVICE_WIDE));
            awaitWaitingForPendingFrees(request);
            assertTrue(request.isAlive(), "the request waits for the block of its size instead of taking a copy at once");
            assertEquals(handlesBefore, creates(), "no copy of the waiting block outside a loop's turn");
            gate.open();
            request.join();
            m.deallocate(between, DEVICE_WIDE);
        });
    }

    /**
     * A loop that is a small part of a larger program gets no copy of its waiting block past the
     * budget (a copy made at the program's peak would stay above it by the block's size): the
     * request waits for the pending frees, as a cudaFree would have natively.
     */
    @Test
    void aLoopInALargerProgramWaitsForItsBlockInsteadOfACopyPastTheBudget() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            open(driver -> driver);
            long rest = m.allocate(3 * SIZE, 0); // the rest of the program: the loop's block is a quarter of its peak
            freedWhileTheDeviceIsBusy(SIZE);
            long handlesBefore = creates();

            Thread request = Thread.ofPlatform().start(() -> m.deallocate(m.allocate(SIZE, DEVICE_WIDE), DEVICE_WIDE));
            awaitWaitingForPendingFrees(request);
            assertEquals(handlesBefore, creates(), "no copy of the waiting block while the request waits");
            gate.open();
            request.join();
            m.deallocate(rest, 0);
        });
    }

    /**
     * A rotation's block is backed as any request once memory is recycled (capped handles), not as
     * one handle: when its free has completed and another size reuses part of it, its other pages
     * can still move to a request past the budget (CuPy without its pool, live, held 1.06-1.10 times
     * its peak while such blocks were one handle each; docs/cold-path.md, "A rotation's block
     * backed as any request").
     */
    @Test
    void aRotationsBlockPartlyReusedByAnotherSizeStillGivesItsFreePagesToARequestPastTheBudget() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            open(driver -> driver);
            long first = freedWhileTheDeviceIsBusy(SIZE);
            long copy = m.allocate(SIZE, DEVICE_WIDE); // a loop's turn: a block beside the waiting one
            assertFalse(overlaps(first, copy), "the waiting block was not handed out");
            gate.open();
            m.deviceWideFence().await(1); // the first block is free for anyone
            long below = m.allocate(SIZE, 0); // the first block again, live
            long above = 30 * PAGE; // fits no free block: placed above the copy
            long post = m.allocate(above, 0);
            m.deallocate(copy, DEVICE_WIDE);
            m.deviceWideFence().await(2); // the copy's block is free for anyone, between two live blocks

            long other = 17 * PAGE; // another size (of the large region): the copy's block is now partly live
            long partly = m.allocate(other, 0);
            long past = 30 * PAGE; // fits no free block, and new memory for all of it would pass the budget
            long large = m.allocate(past, 0);
            long live = SIZE + above + other + past;
            assertTrue(m.stats().reservedBytes() <= live + live / 20,
                    "the copy's free pages moved to the large request: " + m.stats().reservedBytes() / PAGE
                            + " pages held for " + live / PAGE + " live");
            for (long p : new long[] {below, post, partly, large}) m.deallocate(p, 0);
        });
    }

    /** Returns once {@code thread} is parked in the slow path's wait for pending frees. */
    private static void awaitWaitingForPendingFrees(Thread thread) {
        while (true) {
            Thread.State state = thread.getState();
            if (state == Thread.State.TERMINATED) return; // it did not wait: the assertions after say so
            boolean parked = state == Thread.State.WAITING || state == Thread.State.TIMED_WAITING;
            if (parked && java.util.Arrays.stream(thread.getStackTrace())
                    .anyMatch(frame -> frame.getMethodName().equals("waitForPendingFrees"))) return;
            Thread.onSpinWait();
        }
    }

    @Test
    void aFailedSynchronisationAskedForByAFreeIsRetriedWithNoAllocationAsking() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            FaultPlan plan = new FaultPlan().failNth(DriverCall.DEVICE_SYNCHRONIZE, 1, CudaResult.ILLEGAL_ADDRESS);
            open(driver -> new FaultInjectingDriver(driver, plan));
            gate.open();
            long a = m.allocate(SIZE, DEVICE_WIDE);
            m.deallocate(a, DEVICE_WIDE); // the only request: made by the free
            DeviceWideFence fence = m.deviceWideFence();
            while (!fence.await(1, 1_000_000)) Thread.onSpinWait(); // fails once, then completes through the retry
            assertEquals(1, plan.injected(DriverCall.DEVICE_SYNCHRONIZE), "the first synchronisation failed");
            assertEquals(a, m.allocate(SIZE, DEVICE_WIDE), "the retry made the block reusable");
            assertEquals(1, creates());
        });
    }

    /**
     * Random malloc/free loops of a few sizes, freed device-wide, with synchronisations let through
     * at random: no memory freed device-wide is handed out again before a synchronisation that
     * started after its free has finished. The model counts synchronisations at the gate: one that
     * starts after a free reaches the gate after the count read before the free, and they pass one
     * at a time, in order, so by the time the memory comes back more synchronisations must have
     * passed than had arrived before the free. (The fence's tickets cannot serve as the model: it
     * marks the frees covered before it completes the ticket, so a reuse may see the ticket late.)
     */
    @Test
    void randomLoopsNeverReuseMemoryBeforeItsSynchronisation() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            open(driver -> driver);
            SplittableRandom rng = new SplittableRandom(7);
            List<long[]> freed = new ArrayList<>(); // {address, size, synchronisations arrived before the free}
            long[] sizes = {SIZE, 2 * SIZE, 3 * PAGE};
            for (int op = 0; op < 300; op++) {
                long size = sizes[rng.nextInt(sizes.length)];
                long p = m.allocate(size, DEVICE_WIDE);
                long passed = gate.returned();
                for (java.util.Iterator<long[]> it = freed.iterator(); it.hasNext(); ) {
                    long[] f = it.next();
                    if (p < f[0] + f[1] && f[0] < p + size) {
                        assertTrue(passed > f[2], "op " + op + ": memory freed device-wide reused before its synchronisation");
                        it.remove();
                    }
                }
                long arrivedBefore = gate.arrived();
                m.deallocate(p, DEVICE_WIDE);
                freed.add(new long[]{p, size, arrivedBefore});
                if (rng.nextBoolean()) gate.letThrough(1);
            }
        });
    }

    /**
     * The same model with three threads freeing device-wide at once while synchronisations are let
     * through at random by a fourth: each thread notes the synchronisations arrived at the gate, then
     * frees; any thread that gets the memory again must find more of them passed.
     */
    @Test
    void concurrentLoopsNeverReuseMemoryBeforeItsSynchronisation() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            open(driver -> driver);
            List<long[]> freed = new ArrayList<>(); // {address, size, synchronisations arrived before the free}; guarded by itself
            List<String> violations = java.util.Collections.synchronizedList(new ArrayList<>());
            int threads = 3;
            java.util.concurrent.CountDownLatch start = new java.util.concurrent.CountDownLatch(1);
            java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(threads);
            List<Thread> workers = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                long seed = t;
                workers.add(Thread.ofPlatform().start(() -> {
                    SplittableRandom rng = new SplittableRandom(seed);
                    long[] sizes = {SIZE, 2 * SIZE, 3 * PAGE};
                    try {
                        start.await();
                        for (int op = 0; op < 200; op++) {
                            long size = sizes[rng.nextInt(sizes.length)];
                            long p = m.allocate(size, DEVICE_WIDE);
                            long passed = gate.returned();
                            synchronized (freed) {
                                for (java.util.Iterator<long[]> it = freed.iterator(); it.hasNext(); ) {
                                    long[] f = it.next();
                                    if (p < f[0] + f[1] && f[0] < p + size) {
                                        if (passed <= f[2]) violations.add("memory freed device-wide reused before its synchronisation");
                                        it.remove();
                                    }
                                }
                                freed.add(new long[]{p, size, gate.arrived()}); // noted before the free
                            }
                            m.deallocate(p, DEVICE_WIDE);
                        }
                    } catch (Throwable e) {
                        violations.add(e.toString());
                    } finally {
                        done.countDown();
                    }
                }));
            }
            SplittableRandom rng = new SplittableRandom(11);
            start.countDown();
            while (done.getCount() > 0) {
                gate.letThrough(1 + rng.nextInt(2));
                Thread.onSpinWait();
                if (rng.nextInt(64) == 0) Thread.yield();
            }
            for (Thread w : workers) w.join();
            assertEquals(List.of(), violations);
        });
    }
}
