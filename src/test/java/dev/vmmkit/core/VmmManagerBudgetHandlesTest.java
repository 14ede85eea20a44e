package dev.vmmkit.core;

import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;

import java.util.Map;

import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.PAGE;
import static dev.vmmkit.core.AllocatorTestSupport.assertFullyIntact;
import static dev.vmmkit.core.AllocatorTestSupport.fill;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * New pages made when the budget has no room and no whole free handle can move: one handle a page
 * for a request of 16 pages or fewer, so each can move later while its neighbours live; capped
 * handles for a large one. Everything in the large region (P = one page). The scene: two loaded
 * 64-page blocks (a peak of 128 pages: budget 1.02 x 128 + 1 = about 131.6 pages), the first freed
 * and carved again into 10 and 50 pages, and the 10 freed: holes of 10 and 4 pages in a partly
 * live handle, no whole free handle to move, physical memory 3 pages short of the budget. A request
 * of 14 pages fits neither hole; it takes the 4-page tail and the unmapped space above it.
 */
class VmmManagerBudgetHandlesTest {
    private static long created(VmmManager m) {
        return m.stats().driverHandles().handles(DriverCall.CREATE);
    }

    @Test
    void atTheBudgetAMidSizedRequestsNewPagesAreOneHandleEach() {
        HostDriver host = hostDriver(32 * MIB);
        try (VmmManager m = scene(host)) {
            long before = created(m);
            long e = m.allocate(14 * PAGE, 0);
            assertEquals(before + 10, created(m), "the tail's 4 free pages and 10 new ones, in one-page handles");
            fill(host, e, 14 * PAGE, 5);
            m.deallocate(e, 0);
            m.drain();
            assertEquals(host.usage().aliveBytes(), m.stats().reservedBytes());
        } finally {
            assertTrue(host.usage().isEmpty(), "nothing leaks: " + host.usage());
            host.close();
        }
    }

    @Test
    void atTheBudgetALargeRequestsNewPagesAreCapped() {
        HostDriver host = hostDriver(32 * MIB);
        try (VmmManager m = scene(host)) {
            long before = created(m);
            long f = m.allocate(20 * PAGE, 0);
            assertEquals(before + 8, created(m), "the tail's 4 free pages and 16 new ones, in handles of the 2-page cap");
            fill(host, f, 20 * PAGE, 6);
            assertFullyIntact(host, f, 20 * PAGE, 6, "f");
            m.deallocate(f, 0);
        } finally {
            assertTrue(host.usage().isEmpty(), "nothing leaks: " + host.usage());
            host.close();
        }
    }

    private static VmmManager scene(HostDriver host) {
        VmmManager m = new VmmManager(host, VmmConfig.from(Map.of("VMM_VA_SIZE", "64M", "VMM_SMALL_LIMIT", "0")));
        long a = m.allocate(64 * PAGE, 0);
        long b = m.allocate(64 * PAGE, 0);
        assertEquals(2, created(m), "loading: one handle each");
        fill(host, b, 64 * PAGE, 2);
        m.deallocate(a, 0);
        long d1 = m.allocate(10 * PAGE, 0);
        long d2 = m.allocate(50 * PAGE, 0);
        assertEquals(a, d1, "carved from the freed block");
        assertEquals(a + 10 * PAGE, d2, "carved from the freed block");
        fill(host, d2, 50 * PAGE, 3);
        m.deallocate(d1, 0);
        assertEquals(2, created(m), "holes of 10 and 4 pages in a partly live handle");
        assertEquals(128 * PAGE, m.stats().reservedBytes());
        return m;
    }
}
