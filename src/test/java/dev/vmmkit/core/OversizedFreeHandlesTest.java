package dev.vmmkit.core;

import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.FaultInjectingDriver;
import dev.vmmkit.driver.FaultPlan;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.util.Map;

import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.PAGE;
import static dev.vmmkit.core.AllocatorTestSupport.assertFullyIntact;
import static dev.vmmkit.core.AllocatorTestSupport.fill;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A whole free handle far above the cap (a loading request's one handle, freed) is given back
 * rather than carved by a smaller request, whose pages would then pin it; the same size again still
 * reuses it from the cache. Everything in the large region (P = one page): the first request of 24
 * pages gets one handle while the region loads; once it is freed the region no longer loads, and
 * the cap of a 24-page peak is one page, so that handle is 24 caps. The budget (1.5 times the peak)
 * has room for the smaller request's pages: at the budget a hit carves the handle as before, since
 * new pages would pass it ({@code VmmManagerBudgetHandlesTest}).
 */
class OversizedFreeHandlesTest {
    private static final long LOADED = 24 * PAGE;

    private static VmmConfig config() {
        return VmmConfig.from(Map.of("VMM_VA_SIZE", "64M", "VMM_SMALL_LIMIT", "0", "VMM_RESERVE_SLACK", "1.5"));
    }

    private static long handles(VmmManager m, DriverCall kind) {
        return m.stats().driverHandles().handles(kind);
    }

    @Test
    void aSmallerRequestMissesAndTheFreedLoadingHandleIsGivenBack() {
        HostDriver host = hostDriver(32 * MIB);
        try (VmmManager m = new VmmManager(host, config())) {
            long loaded = m.allocate(LOADED, 0);
            assertEquals(1, handles(m, DriverCall.CREATE), "one handle while loading");
            m.deallocate(loaded, 0);
            long hitsBefore = m.stats().cacheHits();

            long small = m.allocate(2 * PAGE, 0);

            assertEquals(hitsBefore, m.stats().cacheHits(), "not a hit: carving it would pin the large handle");
            assertEquals(1, handles(m, DriverCall.RELEASE), "the 24-page handle went back to the driver");
            assertTrue(m.stats().reservedBytes() < LOADED, "physical memory " + m.stats().reservedBytes());
            assertEquals(host.usage().aliveBytes(), m.stats().reservedBytes());
            fill(host, small, 2 * PAGE, 3);
            assertFullyIntact(host, small, 2 * PAGE, 3, "small");
            m.deallocate(small, 0);
        } finally {
            assertTrue(host.usage().isEmpty(), "nothing leaks: " + host.usage());
            host.close();
        }
    }

    @Test
    void theSameSizeAgainIsAHitOnTheSameHandle() {
        HostDriver host = hostDriver(32 * MIB);
        try (VmmManager m = new VmmManager(host, config())) {
            long first = m.allocate(LOADED, 0);
            m.deallocate(first, 0);
            long hitsBefore = m.stats().cacheHits();

            long again = m.allocate(LOADED, 0);

            assertEquals(first, again);
            assertEquals(hitsBefore + 1, m.stats().cacheHits());
            assertEquals(1, handles(m, DriverCall.CREATE));
            assertEquals(0, handles(m, DriverCall.RELEASE));
            m.deallocate(again, 0);
        } finally {
            assertTrue(host.usage().isEmpty(), "nothing leaks: " + host.usage());
            host.close();
        }
    }

    @Test
    void aMemoryTagsHandlesAreCarvedAsBefore() {
        HostDriver host = hostDriver(32 * MIB);
        try (VmmManager m = new VmmManager(host, config())) {
            m.beginTagRegion("cache", false);
            long loaded = m.allocate(LOADED, 0);
            m.deallocate(loaded, 0);
            long small = m.allocate(2 * PAGE, 0);
            m.endTagRegion();

            assertEquals(loaded, small, "a tag's request is carved from its own free handle, which a pause releases whole");
            assertEquals(1, handles(m, DriverCall.CREATE), "no handle made for it");
            m.deallocate(small, 0);
        } finally {
            assertTrue(host.usage().isEmpty(), "nothing leaks: " + host.usage());
            host.close();
        }
    }

    /**
     * The unmap or the release of the handle given back fails once: the request is still served
     * (carved from the handle as before where it stayed mapped), the figures stay equal to the
     * driver's, and closing leaves nothing behind.
     */
    @ParameterizedTest(name = "{0} fails while the handle goes back")
    @EnumSource(value = DriverCall.class, names = {"UNMAP", "RELEASE", "CREATE", "MAP", "SET_ACCESS"})
    void aFaultWhileGivingTheHandleBackLeavesTheAllocatorConsistent(DriverCall kind) {
        HostDriver host = hostDriver(32 * MIB);
        FaultPlan plan = new FaultPlan(1);
        try (VmmManager m = new VmmManager(new FaultInjectingDriver(host, plan), config())) {
            long loaded = m.allocate(LOADED, 0);
            m.deallocate(loaded, 0);
            plan.failNth(kind, 1, CudaResult.INVALID_VALUE);
            long small;
            try {
                small = m.allocate(2 * PAGE, 0);
            } catch (RuntimeException e) {
                // a failed create, map or grant of the request's own handles is the caller's error
                assertTrue(kind == DriverCall.CREATE || kind == DriverCall.MAP || kind == DriverCall.SET_ACCESS,
                        kind + ": " + e);
                plan.clear();
                small = m.allocate(2 * PAGE, 0);
            }
            assertEquals(1, plan.injected(kind), kind + ": the fault happened");
            plan.clear();
            fill(host, small, 2 * PAGE, 4);
            assertFullyIntact(host, small, 2 * PAGE, 4, kind.toString());
            assertEquals(host.usage().aliveBytes(), m.stats().reservedBytes(), kind.toString());
            long more = m.allocate(6 * PAGE, 0);
            fill(host, more, 6 * PAGE, 5);
            assertFullyIntact(host, small, 2 * PAGE, 4, kind.toString());
            assertEquals(host.usage().aliveBytes(), m.stats().reservedBytes(), kind.toString());
        } finally {
            assertTrue(host.usage().isEmpty(), kind + ": nothing leaks: " + host.usage());
            host.close();
        }
    }
}
