package dev.vmmkit.core;

import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.host.HostDriver;
import dev.vmmkit.driver.host.HostEvents;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.PAGE;
import static dev.vmmkit.core.AllocatorTestSupport.assertFullyIntact;
import static dev.vmmkit.core.AllocatorTestSupport.fill;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static dev.vmmkit.core.AllocatorTestSupport.smallConfig;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Memory shared between the size classes at the physical budget: a small request that misses its
 * region's cache takes a free block of the large region, with no driver call; and one region takes
 * the whole free handles of the other, including those freed on a stream whose work has completed
 * since (a region that never misses its cache would otherwise keep them in its stream's list for
 * good). Neither ever takes memory that pending work may still touch.
 */
class VmmManagerCrossRegionTest {
    private static final long A = 1;
    private static final long B = 2;

    private HostDriver host;
    private HostEvents events;
    private VmmManager m;

    private void open(boolean eventsCompleteAtOnce) {
        open(eventsCompleteAtOnce, 1.0);
    }

    private void open(boolean eventsCompleteAtOnce, double slack) {
        host = hostDriver(64 * MIB);
        events = host.hostEvents();
        events.holdCompletion(!eventsCompleteAtOnce);
        m = new VmmManager(host, smallConfig(64 * MIB).withReserveSlack(slack));
    }

    private boolean inSmallRegion(long address) {
        return m.isSmall(m.regionOf(address));
    }

    @AfterEach
    void closeAndCheckNothingLeaks() {
        if (m != null) {
            m.close();
            assertTrue(host.usage().isEmpty(), "after close the driver holds nothing: " + host.usage());
        }
        if (host != null) host.close();
    }

    /** Fills the small region with {@code count} requests of 1 MiB (the small-request limit), frees them on {@code stream}. */
    private List<Long> smallRegionFreedOn(long stream, int count, long seed) {
        List<Long> small = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            long a = m.allocate(MIB, stream);
            fill(host, a, MIB, seed + i);
            small.add(a);
        }
        for (long a : small) m.deallocate(a, stream);
        return small;
    }

    @Test
    void atTheBudgetASmallRequestTakesAFreeBlockOfTheLargeRegionWithNoDriverCall() {
        open(true);
        long big = m.allocate(4 * MIB, A);
        m.deallocate(big, A);
        java.util.Map<DriverCall, Long> before = m.stats().driverCalls();
        long reserved = m.stats().reservedBytes();

        long small = m.allocate(100 * 1024, A);
        fill(host, small, 100 * 1024, 9);
        assertFalse(inSmallRegion(small), "placed in the large region's free block");
        assertTrue(small >= big && small < big + 4 * MIB, "inside the freed large block");
        assertEquals(before, m.stats().driverCalls(), "no driver call");
        assertEquals(reserved, m.stats().reservedBytes(), "no new memory");
        assertFullyIntact(host, small, 100 * 1024, 9, "the small request");
        m.deallocate(small, A);
        assertEquals(-1, m.sizeOf(small), "freed through the large region");
    }

    @Test
    void belowTheBudgetSmallRequestsStayInTheSmallRegion() {
        open(true, 2.0);
        long big = m.allocate(4 * MIB, A);
        m.deallocate(big, A);
        long small = m.allocate(100 * 1024, A);
        assertTrue(inSmallRegion(small), "the size classes stay apart below the budget");
        m.deallocate(small, A);
    }

    @Test
    void aSmallRequestNeverTakesALargeBlockThatPendingWorkMayUse() {
        open(false);
        long big = m.allocate(4 * MIB, A);
        fill(host, big, 4 * MIB, 3);
        m.deallocate(big, A); // A's kernels still run
        long small = m.allocate(100 * 1024, B);
        assertTrue(small + 100 * 1024 <= big || small >= big + 4 * MIB, "B got A's pending block");
        assertFullyIntact(host, big, 4 * MIB, 3, "A's pending block");
        long own = m.allocate(100 * 1024, A);
        assertTrue(own >= big && own < big + 4 * MIB, "A itself may reuse its block at once");
        m.deallocate(small, B);
        m.deallocate(own, A);
    }

    @Test
    void theLargeRegionTakesTheSmallRegionsCompletedFreePagesInsteadOfGrowing() {
        open(true);
        smallRegionFreedOn(A, 16, 1);
        long reserved = m.stats().reservedBytes();
        assertEquals(16 * MIB, reserved);

        // The small region never misses again, so nothing of its own promotes A's frees.
        long big = m.allocate(8 * MIB, B);
        fill(host, big, 8 * MIB, 100);
        long grew = m.stats().reservedBytes() - reserved;
        assertTrue(grew <= 2 * MIB, "the large region made new pages instead, grew by " + grew + ": " + m.stats());
        assertTrue(m.stats().driverCalls(DriverCall.UNMAP) > 0, "the small region's pages moved: " + m.stats());
        assertFullyIntact(host, big, 8 * MIB, 100, "the large request");
        m.deallocate(big, B);
    }

    @Test
    void pagesOfTheOtherRegionWithPendingWorkNeverMove() {
        open(false);
        List<Long> pending = smallRegionFreedOn(A, 8, 1); // A's kernels still run
        long big = m.allocate(4 * MIB, B);
        fill(host, big, 4 * MIB, 50);
        for (int i = 0; i < pending.size(); i++) {
            long a = pending.get(i);
            assertTrue(host.isAccessible(a, MIB), "A's pending block " + i + " was unmapped");
            assertFalse(a < big + 4 * MIB && big < a + MIB, "B got A's pending block " + i);
            assertFullyIntact(host, a, MIB, 1 + i, "A's pending block " + i);
        }
        assertEquals(12 * MIB, m.stats().reservedBytes(), "new pages instead: " + m.stats());
        m.deallocate(big, B);

        // Once A's work completes (and an event recorded after its frees says so), its pages may move.
        events.completeStream(A);
        long again = m.allocate(6 * MIB, B);
        long grew = m.stats().reservedBytes() - 12 * MIB;
        assertTrue(grew <= PAGE, "the large region took A's completed pages, grew by " + grew + ": " + m.stats());
        m.deallocate(again, B);
    }
}
