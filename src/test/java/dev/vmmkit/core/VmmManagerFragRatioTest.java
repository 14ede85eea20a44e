package dev.vmmkit.core;

import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.PAGE;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** VMM_FRAG_RATIO decides whether a large request is stitched from pages moved out of free blocks. */
class VmmManagerFragRatioTest {

    /** Fills 16 pages, frees every other one (holes of one page), then asks for 6 pages at once. */
    private static AllocatorStats run(String fragRatio) {
        HostDriver host = hostDriver(64 * MIB);
        try {
            VmmConfig config = VmmConfig.from(Map.of("VMM_VA_SIZE", "64M", "VMM_SMALL_LIMIT", "0",
                    "VMM_FRAG_RATIO", fragRatio));
            try (VmmManager m = new VmmManager(host, config)) {
                List<Long> pages = new ArrayList<>();
                for (int i = 0; i < 16; i++) pages.add(m.allocate(PAGE, 0));
                for (int i = 0; i < 16; i += 2) m.deallocate(pages.get(i), 0);
                long big = m.allocate(6 * PAGE, 0);
                assertTrue(big != 0);
                return m.stats();
            }
        } finally {
            host.close();
        }
    }

    @Test
    void withoutARatioFreePagesMoveToTheLargeRequest() {
        AllocatorStats stats = run("0");
        assertTrue(stats.driverCalls(DriverCall.UNMAP) > 0, "free pages were moved: " + stats);
        // The budget is peak live times the slack plus one page: 17 pages, not the 22 of the next test.
        assertEquals(17 * PAGE, stats.peakReservedBytes(), "physical memory stayed within the budget: " + stats);
    }

    @Test
    void aRatioAboveOnePiecePerRequestKeepsPagesWhereTheyAre() {
        AllocatorStats stats = run("0.5");
        assertEquals(0, stats.driverCalls(DriverCall.UNMAP), "no page was moved: " + stats);
        assertEquals(22 * PAGE, stats.peakReservedBytes(), "six new pages instead: " + stats);
    }
}
