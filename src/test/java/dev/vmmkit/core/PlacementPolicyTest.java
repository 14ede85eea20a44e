package dev.vmmkit.core;

import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;

import java.util.Map;

import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.PAGE;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Where the slow path places a request over the budget ({@link PlacementChooser}) and which free
 * handles move for it ({@link ReclaimPlanner}). One handle per page, no slack, everything in the
 * large region, so the layouts below are exact (P = one page).
 */
class PlacementPolicyTest {

    private static VmmManager manager(HostDriver host) {
        return new VmmManager(host, VmmConfig.from(Map.of("VMM_VA_SIZE", "64M", "VMM_SMALL_LIMIT", "0",
                "VMM_RESERVE_SLACK", "1.0", "VMM_HANDLE_CAP", Long.toString(PAGE))));
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
            long a = m.allocate(4 * PAGE, 0);
            long b = m.allocate(4 * PAGE, 0);
            long c = m.allocate(4 * PAGE, 0);
            long e = m.allocate(4 * PAGE, 0);
            m.deallocate(b, 0);
            m.deallocate(c, 0);
            long f = m.allocate(10 * PAGE, 0); // over the budget: 7 pages move out of [4,12), from its end
            assertEquals(a + 16 * PAGE, f);
            m.deallocate(e, 0);
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
