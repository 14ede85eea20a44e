package dev.vmmkit.core;

import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.host.HostDriver;
import dev.vmmkit.driver.host.HostEvents;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import static dev.vmmkit.core.AllocatorTestSupport.KIB;
import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.PAGE;
import static dev.vmmkit.core.AllocatorTestSupport.assertFullyIntact;
import static dev.vmmkit.core.AllocatorTestSupport.fill;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static dev.vmmkit.core.AllocatorTestSupport.smallConfig;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Stream-ordered reuse with the device's events held open (as if kernels were still running):
 * freed memory goes back to its own stream at once, to other streams only after an event recorded
 * after the free has completed, and pages that pending work may touch stay mapped. Device-wide
 * (cudaFree-style) frees have their own test, VmmManagerDeviceWideFreeTest.
 */
class VmmManagerStreamTest {
    private static final long A = 1;
    private static final long B = 2;
    private static final long C = 3;

    private HostDriver host;
    private HostEvents events;
    private VmmManager m;

    private void open(long capacity, VmmConfig config) {
        host = hostDriver(capacity);
        events = host.hostEvents();
        events.holdCompletion(true);
        m = new VmmManager(host, config);
    }

    private void open() {
        open(32 * MIB, smallConfig(64 * MIB));
    }

    @AfterEach
    void closeAndCheckNothingLeaks() {
        if (m != null) {
            m.close();
            assertTrue(host.usage().isEmpty(), "after close the driver holds nothing: " + host.usage());
        }
        if (host != null) host.close();
    }

    private static boolean overlaps(long a, long aSize, long b, long bSize) {
        return a < b + bSize && b < a + aSize;
    }

    private Map<DriverCall, Long> driverCalls() {
        return m.stats().driverCalls();
    }

    /** Driver calls, less those of the fence's thread, which may run during a free. */
    private Map<DriverCall, Long> callsOnThisThread() {
        Map<DriverCall, Long> calls = new java.util.EnumMap<>(driverCalls());
        calls.remove(DriverCall.DEVICE_SYNCHRONIZE);
        return calls;
    }

    @ParameterizedTest(name = "{0} bytes")
    @ValueSource(longs = {1, 4096, 64 * KIB, 3 * 64 * KIB + 7, 2 * MIB})
    void memoryFreedOnAStreamIsReusedByThatStreamAtOnce(long size) {
        open();
        long a = m.allocate(size, A);
        m.deallocate(a, A);
        Map<DriverCall, Long> before = driverCalls();
        assertEquals(a, m.allocate(size, A), "the same stream gets its freed block back at once");
        assertEquals(before, driverCalls(), "reuse on the same stream calls no driver function");
        assertEquals(0, events.waitCount(), "nothing waited for the device");
    }

    @Test
    void anotherStreamDoesNotGetMemoryWhilePendingWorkMayUseIt() {
        open();
        long a = m.allocate(PAGE, A);
        fill(host, a, PAGE, 42);
        m.deallocate(a, A);

        List<Long> onB = new ArrayList<>();
        SplittableRandom rng = new SplittableRandom(7);
        for (int i = 0; i < 40; i++) {
            long size = i == 0 ? PAGE : 1 + rng.nextLong(2 * PAGE);
            long b = m.allocate(size, B);
            assertFalse(overlaps(a, PAGE, b, size),
                    String.format("allocation %d on B [0x%x, +%d) overlaps A's pending free block 0x%x", i, b, size, a));
            onB.add(b);
        }
        assertFullyIntact(host, a, PAGE, 42, "A's freed block, which A's pending work may still read");
        assertTrue(host.isAccessible(a, PAGE), "A's freed block stays mapped");
        assertEquals(0, events.waitCount(), "nothing waited for the device");
        for (long b : onB) m.deallocate(b, B);
    }

    @ParameterizedTest(name = "complete all: {0}")
    @ValueSource(booleans = {false, true})
    void afterStreamWorkCompletesAnotherStreamReusesTheMemory(boolean completeAll) {
        open();
        long a = m.allocate(PAGE, A);
        m.deallocate(a, A);
        long b1 = m.allocate(PAGE, B); // a slow-path allocation: records an event after A's free
        assertNotEquals(a, b1);
        assertTrue(events.pendingCount() > 0, "an event marks the end of A's work before the free");

        if (completeAll) events.completeAll();
        else assertTrue(events.completeStream(A) > 0, "completing A completes its event");

        assertEquals(a, m.allocate(PAGE, B), "once A's work finished, B reuses A's freed block");
        assertEquals(0, events.waitCount(), "nothing waited for the device");
    }

    @Test
    void memoryCoveredByACompletedEventIsReusableWhileLaterFreesOnTheSameStreamArePending() {
        open();
        long x = m.allocate(PAGE, A);
        long separator = m.allocate(PAGE, A); // stays live, so x and y never merge
        long y = m.allocate(PAGE, A);
        assertTrue(separator > 0);

        m.deallocate(x, A);
        long b1 = m.allocate(PAGE, B); // records an event on A after x's free
        assertNotEquals(x, b1);
        m.deallocate(y, A);            // a later free: not covered by that event
        events.completeStream(A);      // the event after x's free completes

        long b2 = m.allocate(PAGE, B);
        assertEquals(x, b2, "x's free is covered by a completed event, so B may reuse it");
        long b3 = m.allocate(PAGE, B);
        assertFalse(overlaps(b3, PAGE, y, PAGE), "y's free came after the completed event: B must not get it yet");
    }

    /**
     * x freed on A and promoted (A's work done), then its neighbour y freed on A: the two blocks
     * merge into one for A, so a single-stream program's free space does not stay split between
     * the blocks promoted at the last miss and the frees since. Returns x; {@code keep} bounds the pair.
     */
    private long promotedBlockThenNeighbourFreedOnA() {
        long x = m.allocate(PAGE, A);
        long y = m.allocate(PAGE, A);
        long keep = m.allocate(PAGE, A);
        assertEquals(x + PAGE, y, "precondition: x and y are neighbours");
        assertTrue(keep > 0);
        m.deallocate(x, A);
        long b1 = m.allocate(2 * PAGE, B); // a miss: records an event on A after x's free; x is too small
        events.completeStream(A);
        long b2 = m.allocate(2 * PAGE, B); // a miss: promotes x, still too small for it
        assertFalse(overlaps(b1, 2 * PAGE, x, PAGE) || overlaps(b2, 2 * PAGE, x, PAGE));
        m.deallocate(y, A);
        return x;
    }

    @Test
    void aFreeOnAStreamMergesWithANeighbourThatNoWorkTouches() {
        open();
        long x = promotedBlockThenNeighbourFreedOnA();
        Map<DriverCall, Long> before = driverCalls();
        assertEquals(x, m.allocate(2 * PAGE, A), "x and y are one free block for A");
        assertEquals(before, driverCalls(), "a cache hit: no driver call");
    }

    @Test
    void theMergedBlockWaitsForTheStreamsWorkBeforeAnotherStreamGetsIt() {
        open();
        long x = promotedBlockThenNeighbourFreedOnA();
        long y = x + PAGE;
        List<Long> onB = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            long b = m.allocate(PAGE, B);
            assertFalse(overlaps(b, PAGE, y, PAGE), String.format("allocation %d on B at 0x%x overlaps y, whose free A's work may still read", i, b));
            onB.add(b);
        }
        long miss = m.allocate(3 * PAGE, B); // a miss records an event on A after y's free
        events.completeStream(A);
        assertEquals(x, m.allocate(2 * PAGE, B), "once A's work finished, B reuses the merged block");
        m.deallocate(miss, B);
        for (long b : onB) m.deallocate(b, B);
        assertEquals(0, events.waitCount(), "nothing waited for the device");
    }

    /**
     * Device-wide frees are in the mix: the fence's thread may run a device synchronisation at any
     * moment (VmmManagerDeviceWideFreeTest covers them), so those calls and their waits are left out.
     */
    @Test
    void aFreeNeverCallsTheDriverAndNeverWaits() {
        open();
        SplittableRandom rng = new SplittableRandom(99);
        long[] streams = {A, B, 3, 0, VmmManager.DEVICE_WIDE_STREAM};
        List<long[]> live = new ArrayList<>();
        for (int i = 0; i < 2000; i++) {
            if (live.size() < 64 && rng.nextInt(3) != 0) {
                long stream = streams[rng.nextInt(streams.length)];
                live.add(new long[]{m.allocate(1 + rng.nextLong(3 * PAGE), stream), stream});
            } else if (!live.isEmpty()) {
                long[] victim = live.remove(rng.nextInt(live.size()));
                Map<DriverCall, Long> before = callsOnThisThread();
                m.deallocate(victim[0], victim[1]);
                assertEquals(before, callsOnThisThread(), "deallocate made a driver call");
            }
            if (i % 300 == 299) events.completeStream(streams[rng.nextInt(streams.length)]);
        }
        long waits = events.waitCount();
        assertTrue(waits <= m.stats().driverCalls(DriverCall.DEVICE_SYNCHRONIZE),
                "no free or allocation waited for the device; only the fence's thread did");
        assertEquals(0, m.stats().driverCalls(DriverCall.EVENT_SYNCHRONIZE), "no event synchronize at all");
        for (long[] l : live) m.deallocate(l[0], l[1]);
    }

    /**
     * With no slack, physical memory grows only up to the peak live bytes, so allocations must move
     * pages out of free blocks whose work has completed. They must never take the pages of A's
     * pending free.
     */
    @Test
    void pagesWithPendingWorkAreNeverUnmappedWhileOtherStreamsReclaimPages() {
        open(32 * MIB, smallConfig(64 * MIB).withReserveSlack(1.0));
        long pending = m.allocate(4 * PAGE, A);
        fill(host, pending, 4 * PAGE, 4242);
        m.deallocate(pending, A);

        // A block freed on B whose work completes, then a request larger than the peak live bytes:
        // the allocator must move B's pages, as A's are off limits.
        long y = m.allocate(4 * PAGE, B);
        m.deallocate(y, B);
        long c = m.allocate(PAGE, C); // slow path: records an event after B's free
        events.completeStream(B);
        long unmapsBefore = m.stats().driverCalls(DriverCall.UNMAP);
        long z = m.allocate(8 * PAGE, C);
        assertFalse(overlaps(z, 8 * PAGE, pending, 4 * PAGE), "C got A's pending block");
        assertTrue(m.stats().driverCalls(DriverCall.UNMAP) > unmapsBefore,
                "B's completed pages were reclaimed (otherwise this test proves nothing): " + m.stats());
        assertTrue(host.isAccessible(pending, 4 * PAGE), "A's pending block was unmapped");
        m.deallocate(c, C);
        m.deallocate(z, C);

        // Then a random mix on other streams, completed now and then.
        long[] others = {B, C, 4};
        SplittableRandom rng = new SplittableRandom(5);
        List<long[]> live = new ArrayList<>();
        for (int i = 0; i < 600; i++) {
            if (live.size() < 6 && rng.nextBoolean()) {
                long size = 1 + rng.nextLong(10 * PAGE);
                long stream = others[rng.nextInt(others.length)];
                long b = m.allocate(size, stream);
                assertFalse(overlaps(b, size, pending, 4 * PAGE), "op " + i + ": got A's pending block");
                live.add(new long[]{b, size, stream});
            } else if (!live.isEmpty()) {
                long[] victim = live.remove(rng.nextInt(live.size()));
                m.deallocate(victim[0], victim[2]);
            }
            if (rng.nextInt(3) == 0) events.completeStream(others[rng.nextInt(others.length)]);
            assertTrue(host.isAccessible(pending, 4 * PAGE), "op " + i + ": A's pending block was unmapped");
        }
        assertFullyIntact(host, pending, 4 * PAGE, 4242, "A's pending block");
        assertEquals(0, events.waitCount(), "reclaiming never waited for the device");
        for (long[] l : live) m.deallocate(l[0], l[2]);
    }

    /**
     * Out of memory is the one case where the allocator may wait for the device: it synchronizes the
     * pending frees, after which their pages may be released and reused.
     */
    @Test
    void outOfMemoryWaitsForPendingFreesAndThenReusesTheirPages() {
        open(2 * MIB, smallConfig(16 * MIB));
        long a = m.allocate(MIB + PAGE, A); // large region
        m.deallocate(a, A);
        long b = m.allocate(MIB, B);       // small region: needs 16 pages, only 15 are left
        assertTrue(m.owns(b));
        assertEquals(1, m.stats().outOfMemoryRecoveries(), "drain and retry recovered");
        assertTrue(events.waitCount() > 0, "recovery synchronized A's pending free before releasing its pages");
        m.deallocate(b, B);
    }

    /**
     * A program that uses thousands of short-lived streams: once a stream's frees are reusable and
     * its event idle, the region forgets it (and destroys its event), keeping only a few.
     */
    @Test
    void thousandsOfShortLivedStreamsDoNotGrowTheFreeLists() {
        open();
        events.holdCompletion(false);
        for (long stream = 100; stream < 5100; stream++) {
            long a = m.allocate(PAGE, stream);
            m.deallocate(a, stream);
        }
        for (RegionStats r : m.regionStats()) {
            assertTrue(r.trackedStreams() <= StreamFreeLists.IDLE_STREAMS_KEPT + 2,
                    "streams tracked after 5000 short-lived ones: " + r);
        }
        Map<DriverCall, Long> calls = driverCalls();
        long eventsAlive = calls.getOrDefault(DriverCall.EVENT_CREATE, 0L) - calls.getOrDefault(DriverCall.EVENT_DESTROY, 0L);
        assertTrue(eventsAlive <= 2 * (StreamFreeLists.IDLE_STREAMS_KEPT + 2), "events alive: " + eventsAlive + " " + calls);
    }

    /** With large handles, pages that pending work may touch are never unmapped either: only whole free handles move. */
    @Test
    void largeHandlesWithPendingWorkAreNeverReclaimed() {
        open(32 * MIB, smallConfig(64 * MIB).withReserveSlack(1.0).withHandleCapBytes(8 * PAGE));
        long pending = m.allocate(6 * PAGE, A);
        fill(host, pending, 6 * PAGE, 77);
        long done = m.allocate(6 * PAGE, B);
        m.deallocate(pending, A); // A's work still runs
        m.deallocate(done, B);
        events.completeStream(B);
        SplittableRandom rng = new SplittableRandom(5);
        for (int i = 0; i < 50; i++) {
            long size = (1 + rng.nextInt(12)) * PAGE;
            long c = m.allocate(size, C);
            assertFalse(overlaps(c, size, pending, 6 * PAGE), "op " + i + ": got A's pending block");
            assertTrue(host.isAccessible(pending, 6 * PAGE), "op " + i + ": A's pending block was unmapped");
            m.deallocate(c, C);
            events.completeStream(C);
        }
        assertFullyIntact(host, pending, 6 * PAGE, 77, "A's pending block");
    }
}
