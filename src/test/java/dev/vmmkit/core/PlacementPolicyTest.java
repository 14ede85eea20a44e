package dev.vmmkit.core;

import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.FaultInjectingDriver;
import dev.vmmkit.driver.FaultPlan;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;

import java.util.Map;

import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.PAGE;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * Where the slow path places a request over the budget ({@link PlacementChooser}) and which free
 * handles move for it ({@link ReclaimPlanner}). One handle per page, no slack, everything in the
 * large region, so the layouts below are exact (P = one page).
 */
class PlacementPolicyTest {
    private static final long STREAM = 1;
    private static final long OTHER_STREAM = 2;

    private static VmmConfig config() {
        return VmmConfig.from(Map.of("VMM_VA_SIZE", "64M", "VMM_SMALL_LIMIT", "0",
                "VMM_RESERVE_SLACK", "1.0", "VMM_HANDLE_CAP", Long.toString(PAGE)));
    }

    private static VmmManager manager(HostDriver host) {
        return new VmmManager(host, config());
    }

    /**
     * Lays out a [0,4) free [4,5) unmapped [5,12) e [12,16) f [16,26) on {@code stream}: a and e
     * live, f placed over the budget, which moved 7 pages out of the free [4,12) from its end.
     * Returns a and e.
     */
    private static long[] holeBelowE(VmmManager m, long stream) {
        long a = m.allocate(4 * PAGE, stream);
        long b = m.allocate(4 * PAGE, stream);
        long c = m.allocate(4 * PAGE, stream);
        long e = m.allocate(4 * PAGE, stream);
        m.deallocate(b, stream);
        m.deallocate(c, stream);
        assertEquals(a + 16 * PAGE, m.allocate(10 * PAGE, stream));
        return new long[]{a, e};
    }

    private static long handles(VmmManager m, DriverCall call) {
        return m.stats().driverHandles().handles(call);
    }

    /**
     * Layout before the last request: a [0,4) free [4,5) unmapped [5,12) free [12,16) f [16,26). The
     * request of 11 pages fits across the unmapped hole with the free memory on both sides, mapping
     * its 7 pages, which the budget allows without moving any; on the unmapped end of the region it
     * would need 11 pages, 4 of them moved.
     */
    @Test
    void overTheBudgetTheSpanNeedingFewestPagesWins() {
        HostDriver host = hostDriver(64 * MIB);
        try (VmmManager m = manager(host)) {
            long[] ae = holeBelowE(m, 0);
            long a = ae[0];
            m.deallocate(ae[1], 0);
            long unmappedBefore = handles(m, DriverCall.UNMAP);
            long mappedBefore = handles(m, DriverCall.MAP);

            long g = m.allocate(11 * PAGE, 0);

            assertEquals(a + 4 * PAGE, g, "starts in the free block below the hole");
            assertEquals(7, handles(m, DriverCall.MAP) - mappedBefore, "only the hole's pages are mapped");
            assertEquals(unmappedBefore, handles(m, DriverCall.UNMAP), "no page moved");
            assertEquals(26 * PAGE, m.stats().peakReservedBytes(), "the budget: peak live 25 pages plus one");
        } finally {
            host.close();
        }
    }

    /**
     * The same placement across the hole when a map fails halfway: the error reaches the caller,
     * the free blocks on both sides and the hole are as they were, and the retry lands where the
     * first attempt would have.
     */
    @Test
    void aFailedMapAcrossTheHoleLeavesEveryBlockAsItWas() {
        HostDriver host = hostDriver(64 * MIB);
        FaultPlan plan = new FaultPlan();
        try (VmmManager m = new VmmManager(new FaultInjectingDriver(host, plan), config())) {
            long[] ae = holeBelowE(m, 0);
            long a = ae[0];
            m.deallocate(ae[1], 0);
            BlockMap before = m.blockMap();

            plan.failNth(DriverCall.MAP, 4, CudaResult.INVALID_VALUE);
            assertThrows(DriverException.class, () -> m.allocate(11 * PAGE, 0));

            assertEquals(before, m.blockMap(), "every block as it was");
            assertEquals(host.usage().aliveBytes(), m.stats().reservedBytes(), "no handle leaked (the new ones are pooled)");
            assertEquals(a + 4 * PAGE, m.allocate(11 * PAGE, 0), "the retry takes the same span");
        } finally {
            host.close();
        }
    }

    /**
     * As above, but the free block above the hole was freed on another stream whose work is still
     * queued: the placement may not use it (nor move its pages), so the request goes to the unmapped
     * end of the region.
     */
    @Test
    void overTheBudgetFreeMemoryAnotherStreamMayStillUseIsLeftAlone() {
        HostDriver host = hostDriver(64 * MIB);
        try (VmmManager m = manager(host)) {
            long[] ae = holeBelowE(m, STREAM);
            long a = ae[0];
            long e = ae[1];
            host.hostEvents().holdCompletion(true);
            m.deallocate(e, OTHER_STREAM);

            long g = m.allocate(11 * PAGE, STREAM);

            assertEquals(a + 26 * PAGE, g, "on the unmapped end: " + m.blockMap());
            assertEquals(BlockMap.Kind.FREE_MAPPED, kindAt(m, e), "e's pages stay where they are");
            host.hostEvents().holdCompletion(false);
        } finally {
            host.close();
        }
    }

    /**
     * Two free blocks of the same size: the one freed first (b) gives all its pages before the one
     * freed last (d) gives any, since memory freed recently is the likeliest to be asked for again.
     */
    @Test
    void theBlockFreedLongestAgoGivesItsPagesFirst() {
        HostDriver host = hostDriver(64 * MIB);
        try (VmmManager m = manager(host)) {
            long a = m.allocate(4 * PAGE, 0);
            long b = m.allocate(4 * PAGE, 0);
            m.allocate(4 * PAGE, 0);
            long d = m.allocate(4 * PAGE, 0);
            m.allocate(4 * PAGE, 0);
            m.deallocate(b, 0);
            m.deallocate(d, 0);

            m.allocate(6 * PAGE, 0); // budget 21 pages, 20 mapped: 5 pages must move

            assertEquals(BlockMap.Kind.UNMAPPED, kindAt(m, a + 4 * PAGE), "b's pages moved: " + m.blockMap());
            assertEquals(BlockMap.Kind.FREE_MAPPED, kindAt(m, a + 12 * PAGE), "d keeps most of its pages: " + m.blockMap());
            assertEquals(BlockMap.Kind.UNMAPPED, kindAt(m, a + 15 * PAGE), "one page from d's end");
        } finally {
            host.close();
        }
    }

    private static BlockMap.Kind kindAt(VmmManager m, long address) {
        for (BlockMap.Region r : m.blockMap().regions()) {
            for (BlockMap.Block block : r.blocks()) {
                if (address >= block.address() && address < block.address() + block.size()) return block.kind();
            }
        }
        throw new AssertionError("no block holds " + address);
    }
}
