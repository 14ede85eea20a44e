package dev.vmmkit.core;

import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.DriverException;
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
import java.util.Map;
import java.util.Set;

import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.PAGE;
import static dev.vmmkit.core.AllocatorTestSupport.assertFullyIntact;
import static dev.vmmkit.core.AllocatorTestSupport.fill;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static dev.vmmkit.core.AllocatorTestSupport.smallConfig;
import static dev.vmmkit.core.DeviceSyncGate.fenceThreadsSince;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * cudaFree-style frees ({@link VmmManager#DEVICE_WIDE_STREAM}): the memory goes to no stream
 * until a device synchronisation that started after the free has finished, since work on any
 * stream, even one the allocator never saw (a non-blocking stream), may still use it. The free
 * itself calls no driver function; it asks the fence, whose thread synchronises at once.
 */
class VmmManagerDeviceWideFreeTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(30);
    private static final long DEVICE_WIDE = VmmManager.DEVICE_WIDE_STREAM;
    private static final long ONE = 1;
    private static final long TWO = 2;

    private final Set<Thread> fenceThreadsBefore = fenceThreadsSince(Set.of());
    private final DeviceSyncGate gate = new DeviceSyncGate();
    private HostDriver host;
    private HostEvents events;
    private VmmManager m;

    /** A manager over the host driver with events held open (a busy device); wrap adds an adaptor. */
    private void open(java.util.function.UnaryOperator<VmmDriver> wrap) {
        host = hostDriver(32 * MIB);
        events = host.hostEvents();
        events.holdCompletion(true);
        m = new VmmManager(wrap.apply(host), smallConfig(64 * MIB));
    }

    @AfterEach
    void closeAndCheckNothingLeaks() {
        gate.openAndCloseCleanly(m, host, fenceThreadsBefore);
    }

    private static boolean overlaps(long a, long aSize, long b, long bSize) {
        return a < b + bSize && b < a + aSize;
    }

    @Test
    void noStreamGetsTheMemoryUntilADeviceSynchronisationHasRun() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            open(driver -> new DeviceSyncGatedDriver(driver, gate));
            long kernel = events.create();
            events.record(kernel, ONE); // work in flight on stream 1, which no later free names
            long a = m.allocate(PAGE, ONE);
            fill(host, a, PAGE, 42);
            m.deallocate(a, DEVICE_WIDE);

            List<Long> others = new ArrayList<>();
            for (long stream : new long[]{0, ONE, TWO, DEVICE_WIDE}) {
                long b = m.allocate(PAGE, stream);
                assertFalse(overlaps(a, PAGE, b, PAGE), "stream " + stream + " got the memory freed device-wide");
                others.add(b);
            }
            gate.awaitArrivals(1); // the fence waits for the device
            assertFalse(events.isComplete(kernel), "the device is still busy");
            assertTrue(host.isAccessible(a, PAGE), "memory freed device-wide stays mapped");
            assertFullyIntact(host, a, PAGE, 42, "memory freed device-wide, which stream 1 may still read");
            long waitsBefore = events.waitCount();

            gate.open();
            DeviceWideFence fence = m.deviceWideFence();
            fence.await(fence.request());
            assertTrue(events.isComplete(kernel), "the device synchronisation waited for stream 1's work");
            assertTrue(events.waitCount() > waitsBefore, "and counts as a wait for the device");
            assertTrue(m.stats().driverCalls(DriverCall.DEVICE_SYNCHRONIZE) >= 1, "and as a driver call");
            assertEquals(a, m.allocate(PAGE, TWO), "after the synchronisation any stream reuses the memory");
            for (long b : others) m.deallocate(b, TWO);
            events.destroy(kernel);
        });
    }

    /**
     * Memory no queued work can touch, next to a block freed device-wide, stays reusable by every
     * stream: the device-wide free does not absorb it, or it would wait for the synchronisation too.
     */
    @Test
    void aDeviceWideFreeDoesNotHideItsReusableNeighbour() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            open(driver -> new DeviceSyncGatedDriver(driver, gate));
            long x = m.allocate(PAGE, ONE);
            long y = m.allocate(PAGE, ONE);
            long keep = m.allocate(PAGE, ONE);
            assertEquals(x + PAGE, y, "precondition: x and y are neighbours");
            m.deallocate(x, ONE);
            long b1 = m.allocate(2 * PAGE, TWO); // a miss: records an event on stream 1 after x's free
            events.completeStream(ONE);
            long b2 = m.allocate(2 * PAGE, TWO); // a miss: promotes x (too small for this request)
            m.deallocate(y, DEVICE_WIDE);
            assertEquals(x, m.allocate(PAGE, TWO), "x is still reusable while y waits for the device");
            assertFalse(overlaps(b1, 2 * PAGE, y, PAGE) || overlaps(b2, 2 * PAGE, y, PAGE));
            for (long b : new long[]{b1, b2, x}) m.deallocate(b, TWO);
            m.deallocate(keep, ONE);
        });
    }

    /**
     * A same-size cudaMalloc/cudaFree loop of a large block: while the first block waits for its
     * device synchronisation, the budget counts it as in use and makes a second one instead of
     * waiting; from then on the loop alternates between the two, each reused only once a
     * synchronisation that started after its free has finished. No third block, nothing trimmed.
     */
    @Test
    void aLargeMallocFreeLoopAlternatesBetweenTwoBlocksWithoutReusingOneTooEarly() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            open(driver -> new DeviceSyncGatedDriver(driver, gate));
            long size = 24 * PAGE; // large region
            DeviceWideFence fence = m.deviceWideFence();
            long a = m.allocate(size, DEVICE_WIDE);
            fill(host, a, size, 1);
            m.deallocate(a, DEVICE_WIDE);
            long b = m.allocate(size, DEVICE_WIDE); // a waits for the device (the gate holds it)
            assertFalse(overlaps(a, size, b, size), "the block freed device-wide was not reused before a synchronisation");
            assertFullyIntact(host, a, size, 1, "the waiting block is untouched");
            long created = m.stats().driverHandles().handles(DriverCall.CREATE);
            assertTrue(m.stats().reservedBytes() >= 2 * size, "a second block of new memory");

            long inHand = b;
            long waiting = a;
            for (int round = 0; round < 6; round++) {
                // The waiting block's synchronisation (ticket round + 1: each free requests one) has
                // started and is held; a free now needs the next one.
                gate.awaitArrivals(round + 1);
                m.deallocate(inHand, DEVICE_WIDE);
                gate.letThrough(1);
                fence.await(round + 1);
                long got = m.allocate(size, DEVICE_WIDE);
                assertEquals(waiting, got, "round " + round + ": the block whose synchronisation finished");
                waiting = inHand;
                inHand = got;
            }
            assertEquals(created, m.stats().driverHandles().handles(DriverCall.CREATE), "no third block");
            assertEquals(0, m.stats().driverHandles().handles(DriverCall.RELEASE), "nothing trimmed");
            m.deallocate(inHand, DEVICE_WIDE);
        });
    }

    /**
     * Once a synchronisation covers a device-wide free, the next request's best fit sees the block
     * as a cache hit: it is not left waiting for the next miss while hits carve other free blocks
     * (a larger block here), which made a live program's layout drift from its trace's.
     */
    @Test
    void aCoveredDeviceWideFreeIsTheNextRequestsBestFitWithoutAMiss() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            open(driver -> new DeviceSyncGatedDriver(driver, gate));
            gate.open();
            long x = m.allocate(PAGE, 0);
            long neighbour = m.allocate(PAGE, 0); // keeps x apart from the larger block
            long larger = m.allocate(4 * PAGE, 0);
            m.deallocate(larger, 0); // free for stream 0 at once: a hit would carve it
            m.deallocate(x, DEVICE_WIDE);
            DeviceWideFence fence = m.deviceWideFence();
            fence.await(fence.request());
            long misses = m.stats().cacheMisses();
            long hits = m.stats().cacheHits();
            assertEquals(x, m.allocate(PAGE, 0), "the covered block is the best fit");
            assertEquals(misses, m.stats().cacheMisses(), "found without a miss");
            assertEquals(hits + 1, m.stats().cacheHits());
            m.deallocate(x, 0);
            m.deallocate(neighbour, 0);
        });
    }

    /** The same across streams: a block freed on one stream, whose work is still running, is not another stream's. */
    @Test
    void aBlockWaitingForAnotherStreamDoesNotMakeTheNextRequestWait() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            open(driver -> driver);
            long size = 24 * PAGE;
            long a = m.allocate(size, ONE);
            m.deallocate(a, ONE);
            long b = m.allocate(size, TWO); // a waits for stream 1's work (events held open)
            assertFalse(overlaps(a, size, b, size));
            long created = m.stats().driverHandles().handles(DriverCall.CREATE);
            assertTrue(m.stats().reservedBytes() >= 2 * size, "a second block of new memory");
            m.deallocate(b, TWO);
            assertEquals(b, m.allocate(size, TWO), "stream 2 reuses its own free at once");
            events.completeStream(ONE);
            assertEquals(a, m.allocate(size, 0), "once stream 1's work is done, its block is any stream's");
            assertEquals(created, m.stats().driverHandles().handles(DriverCall.CREATE), "no third block");
            m.deallocate(a, 0);
            m.deallocate(b, TWO);
        });
    }

    @Test
    void theFencesThreadStartsWhenTheManagerOpensAndSynchronisesNothingUntilAFree() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            open(driver -> new DeviceSyncGatedDriver(driver, gate));
            assertEquals(1, fenceThreadsSince(fenceThreadsBefore).size(),
                    "the fence's thread runs before any free, so no program call pays for its start");
            long a = m.allocate(PAGE, ONE);
            m.deallocate(a, ONE);
            assertEquals(0, gate.arrived(), "no synchronisation without a device-wide free");
            assertEquals(0L, m.stats().driverCalls().getOrDefault(DriverCall.DEVICE_SYNCHRONIZE, 0L));
            m.deallocate(m.allocate(PAGE, TWO), DEVICE_WIDE);
            gate.awaitArrivals(1); // the thread already running takes the free
        });
    }

    /**
     * A lone cudaFree's synchronisation is put off (so it does not run beside the program's next
     * driver calls) until a request could use the memory: a miss that a waiting block would fit
     * hurries the fence; one that no waiting block fits does not.
     */
    @Test
    void aLoneFreesSynchronisationWaitsUntilARequestCouldUseItsMemory() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            host = hostDriver(32 * MIB);
            events = host.hostEvents();
            // A known peak: no request here passes the budget (which would wait for the free, as it should).
            m = VmmManager.withFenceGrace(new DeviceSyncGatedDriver(host, gate), smallConfig(64 * MIB).withPeakHintBytes(16 * MIB),
                    java.util.concurrent.TimeUnit.MINUTES.toNanos(10));
            long a = m.allocate(2 * PAGE, ONE);
            m.deallocate(a, DEVICE_WIDE);
            DeviceWideFence fence = m.deviceWideFence();
            while (!fence.holding()) Thread.onSpinWait();
            // More than everything mapped: no waiting block fits it (the free merged with the pages mapped ahead).
            long larger = m.allocate(m.stats().reservedBytes() + PAGE, TWO);
            assertTrue(fence.holding(), "a request the waiting free cannot serve leaves the grace alone");
            assertEquals(0, gate.arrived());
            long same = m.allocate(2 * PAGE, TWO); // the waiting block would fit: the fence runs now
            gate.awaitArrivals(1);
            gate.open();
            for (long p : new long[]{larger, same}) m.deallocate(p, TWO);
        });
    }

    /**
     * A request past the budget waits for a cudaFree's memory at most its bound; with the device
     * still busy it gives up, is placed on new memory, and the give-up is counted for its own
     * thread (what a recorder reads to mark the request), not for any other.
     */
    @Test
    void aRequestPastTheBudgetGivesUpWaitingForABusyDeviceAndItsThreadCountsIt() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            host = hostDriver(64 * MIB);
            events = host.hostEvents();
            m = new VmmManager(new DeviceSyncGatedDriver(host, gate), smallConfig(128 * MIB).withPeakHintBytes(16 * MIB));
            DeviceWideFreeClock clock = m.deviceWideFreeClock();
            long a = m.allocate(16 * MIB, ONE);
            m.deallocate(a, DEVICE_WIDE);
            gate.awaitArrivals(1); // its synchronisation is held: the device stays busy
            assertEquals(0, clock.waitsGivenUp());

            long b = m.allocate(12 * MIB, TWO); // a and b together pass the budget: b waits for a, then gives up
            assertFalse(overlaps(a, 16 * MIB, b, 12 * MIB), "b got memory whose cudaFree the device had not finished");
            assertEquals(1, clock.waitsGivenUp(), "the wait that gave up is counted");
            long[] otherThreads = new long[1];
            Thread other = Thread.ofPlatform().start(() -> otherThreads[0] = clock.waitsGivenUp());
            other.join();
            assertEquals(0, otherThreads[0], "for the thread that waited only");
            assertEquals(1, m.stats().freeWaitsGivenUp(), "and in the manager's stats");

            gate.open();
            DeviceWideFence fence = m.deviceWideFence();
            fence.await(fence.request());
            long c = m.allocate(16 * MIB, TWO); // a is back: no wait, nothing more given up
            assertEquals(1, clock.waitsGivenUp());
            m.deallocate(b, TWO);
            m.deallocate(c, TWO);
        });
    }

    @Test
    void theFreeCallsNoDriverFunctionAndAsksTheFenceForASynchronisationAtOnce() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            open(driver -> new DeviceSyncGatedDriver(driver, gate)); // synchronisations held at the gate
            long a = m.allocate(PAGE, ONE);
            long b = m.allocate(3 * PAGE, TWO);
            Map<DriverCall, Long> before = m.stats().driverCalls();
            m.deallocate(a, DEVICE_WIDE);
            gate.awaitArrivals(1); // the fence's thread started one for it, with no allocation asking
            m.deallocate(b, DEVICE_WIDE); // while that one runs: b needs the next
            Map<DriverCall, Long> after = m.stats().driverCalls();
            assertEquals(withoutDeviceSync(before), withoutDeviceSync(after), "deallocate made a driver call");
            assertEquals(1, after.getOrDefault(DriverCall.DEVICE_SYNCHRONIZE, 0L)
                    - before.getOrDefault(DriverCall.DEVICE_SYNCHRONIZE, 0L), "one synchronisation, on the fence's thread");
            assertEquals(1, fenceThreadsSince(fenceThreadsBefore).size(), "one thread serves the manager's fence");

            gate.letThrough(1); // a's synchronisation returns; b's starts after it
            gate.awaitArrivals(2);
            long c = m.allocate(PAGE, TWO);
            assertEquals(a, c, "a's synchronisation, requested by its free, made it reusable");
            assertFalse(overlaps(b, 3 * PAGE, m.allocate(3 * PAGE, ONE), 3 * PAGE),
                    "b was freed while a's synchronisation ran: it waits for the next one");
        });
    }

    private static Map<DriverCall, Long> withoutDeviceSync(Map<DriverCall, Long> calls) {
        Map<DriverCall, Long> copy = new java.util.EnumMap<>(DriverCall.class);
        copy.putAll(calls);
        copy.remove(DriverCall.DEVICE_SYNCHRONIZE);
        return copy;
    }

    @Test
    void aFailedDeviceSynchronisationIsRetriedAndNothingIsLost() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            FaultPlan plan = new FaultPlan().failNth(DriverCall.DEVICE_SYNCHRONIZE, 1, CudaResult.ILLEGAL_ADDRESS);
            open(driver -> new FaultInjectingDriver(driver, plan));
            long a = m.allocate(PAGE, ONE);
            m.deallocate(a, DEVICE_WIDE);
            // Slow path: it asks for a's synchronisation and waits a while; the first one fails and
            // is retried, so a comes back to this request or to the next.
            long b = m.allocate(PAGE, TWO);
            DeviceWideFence fence = m.deviceWideFence();
            while (fence.completedTicket() < 1) Thread.sleep(1); // the retry, with no new request
            assertEquals(1, plan.injected(DriverCall.DEVICE_SYNCHRONIZE), "the first synchronisation failed");
            assertTrue(m.stats().driverCalls(DriverCall.DEVICE_SYNCHRONIZE) >= 2, "then it was retried");
            long c = b == a ? b : m.allocate(PAGE, TWO);
            assertEquals(a, c, "the retry made the memory reusable");
            if (c != b) m.deallocate(c, TWO);
            m.deallocate(b, TWO);
        });
    }

    @Test
    void outOfMemoryReportsAFailingDeviceSynchronisationAndRecoversOnceItWorks() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            FaultPlan plan = new FaultPlan().failAlways(DriverCall.DEVICE_SYNCHRONIZE, CudaResult.ILLEGAL_ADDRESS);
            host = hostDriver(2 * MIB);
            events = host.hostEvents();
            events.holdCompletion(true);
            m = new VmmManager(new FaultInjectingDriver(host, plan), smallConfig(16 * MIB));
            long a = m.allocate(MIB + PAGE, ONE);  // large region
            m.deallocate(a, DEVICE_WIDE);
            // Small region: needs 16 pages, 15 are left. Recovery must wait for the device, which fails.
            DriverException failure = assertThrows(DriverException.class, () -> m.allocate(MIB, TWO));
            assertEquals(CudaResult.ILLEGAL_ADDRESS, failure.result(), failure.getMessage());
            assertTrue(host.isAccessible(a, MIB + PAGE), "memory freed device-wide stays mapped while the device is not known idle");

            plan.clear();
            long b = m.allocate(MIB, TWO);
            assertTrue(m.owns(b));
            assertEquals(1, m.stats().outOfMemoryRecoveries(), "drain, a device synchronisation and retry recovered");
            m.deallocate(b, TWO);
        });
    }
}
