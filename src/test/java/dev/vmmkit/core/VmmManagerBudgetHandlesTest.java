package dev.vmmkit.core;

import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.FaultInjectingDriver;
import dev.vmmkit.driver.FaultPlan;
import dev.vmmkit.driver.VmmDriver;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.util.HashMap;
import java.util.Map;
import java.util.function.BiConsumer;

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

    /**
     * A request of 14 pages (not large) gets one handle per new page; one of 20 pages (large)
     * handles of the cap (2 pages for the 128-page peak). Either takes the 4-page tail first.
     */
    @ParameterizedTest(name = "{0} pages: {1} new handles")
    @CsvSource({"14, 10", "20, 8"})
    void atTheBudgetOnlyARequestThatIsNotLargeGetsOnePageHandles(int pages, int newHandles) {
        inScene((host, m) -> {
            long before = created(m);
            long e = m.allocate(pages * PAGE, 0);
            assertEquals(before + newHandles, created(m), pages - 4 + " new pages");
            fill(host, e, pages * PAGE, 5);
            assertFullyIntact(host, e, pages * PAGE, 5, "the request");
            m.deallocate(e, 0);
        });
    }

    /**
     * Under a peak hint (the scene's own peak), the 20-page request's moves fall far short: none of
     * the 16 pages that must come from free memory can move (the holes lie in a partly live
     * handle). Its new pages are then one handle each, though it is large: 16 handles, against the
     * 8 capped ones of the test above, without the hint.
     */
    @Test
    void underAHintALargeRequestWhoseMovesFellFarShortGetsOnePageHandles() {
        inScene(null, Map.of("VMM_PEAK_HINT", Long.toString(128 * PAGE)), (host, m) -> {
            long before = created(m);
            long e = m.allocate(20 * PAGE, 0);
            assertEquals(before + 16, created(m), "16 new pages, a handle each");
            fill(host, e, 20 * PAGE, 6);
            assertFullyIntact(host, e, 20 * PAGE, 6, "the request");
            m.deallocate(e, 0);
        });
    }

    /**
     * The 14-page request falls short (the holes' 14 pages cannot move) and is not large, so the cap
     * halves: a large request after it, which gets capped handles (2 pages for this peak, as the
     * test above shows), now gets one-page handles.
     */
    @Test
    void aShortfallOfARequestThatIsNotLargeHalvesTheCapForLaterRequests() {
        inScene((host, m) -> {
            long e1 = m.allocate(14 * PAGE, 0);
            long handlesBefore = created(m);
            long physicalBefore = m.stats().reservedBytes();
            long e2 = m.allocate(20 * PAGE, 0);
            long newHandles = created(m) - handlesBefore;
            long newPages = (m.stats().reservedBytes() - physicalBefore) / PAGE;
            assertTrue(newPages > 1, newPages + " new pages");
            assertEquals(newPages, newHandles, "one handle per new page");
            fill(host, e2, 20 * PAGE, 6);
            fill(host, e1, 14 * PAGE, 5);
            assertFullyIntact(host, e2, 20 * PAGE, 6, "the large request");
            m.deallocate(e2, 0);
            m.deallocate(e1, 0);
        });
    }

    /**
     * With a peak hint of 256 pages the budget has room, so no page must move; a request that keeps
     * live bytes within their peak (114 + 14 = 128 pages) is still recycled memory and gets one
     * handle per new page, while one that raises the peak (114 + 15) gets handles of the cap (2
     * pages: 1/64 of the 129 reached, more than half the hint), as a growing program's do. With a
     * hint of 160 pages the peak reached (128) is past three quarters of it: the program grows toward
     * its remembered peak by recycling, and the request that raises the peak, within the hint, gets
     * one handle per new page too (170 pages: 127.5 is three quarters; 172: 129 is).
     */
    @ParameterizedTest(name = "{0} pages, hint {1} pages, one page a handle: {2}")
    @CsvSource({"14, 256, true", "15, 256, false", "15, 160, true", "15, 170, true", "15, 172, false"})
    void withAPeakHintRecycledMemoryStillGetsOnePageHandles(int pages, int hintPages, boolean onePageEach) {
        inScene(null, Map.of("VMM_PEAK_HINT", String.valueOf(hintPages * PAGE)), true, (host, m) -> {
            long handlesBefore = created(m);
            long physicalBefore = m.stats().reservedBytes();
            long e = m.allocate(pages * PAGE, 0);
            long newHandles = created(m) - handlesBefore;
            long newPages = (m.stats().reservedBytes() - physicalBefore) / PAGE;
            assertTrue(newPages > 0, "the request missed the cache");
            if (onePageEach) {
                assertEquals(newPages, newHandles, "one handle per new page");
            } else {
                assertTrue(newHandles < newPages, newHandles + " handles for " + newPages + " new pages");
            }
            fill(host, e, pages * PAGE, 5);
            assertFullyIntact(host, e, pages * PAGE, 5, "the request");
            m.deallocate(e, 0);
        });
    }

    /**
     * One failure at the Nth create, map or setAccess of a request's one-page handles (the
     * mid-sized request at the budget; the large one whose moves fell far short under a hint): the
     * request may fail, but the figures stay equal to the driver's, the scene's live block stays
     * intact, the same request succeeds once the faults stop, and nothing leaks.
     */
    @ParameterizedTest(name = "{0} fails at the budget, {1} pages, hint {2} pages")
    @CsvSource({"CREATE, 14, 0", "MAP, 14, 0", "SET_ACCESS, 14, 0", "UNMAP, 14, 0",
            "CREATE, 20, 128", "MAP, 20, 128", "SET_ACCESS, 20, 128", "UNMAP, 20, 128"})
    void aFaultAmongTheOnePageHandlesLeavesTheAllocatorConsistent(DriverCall kind, int pages, int hintPages) {
        Map<String, String> settings = hintPages == 0 ? Map.of() : Map.of("VMM_PEAK_HINT", Long.toString(hintPages * PAGE));
        long failed = 0;
        for (int n = 1; n <= 6; n++) {
            String note = kind + " #" + n;
            FaultPlan plan = new FaultPlan();
            int nth = n;
            inScene(plan, settings, (host, m) -> {
                plan.failNth(kind, nth, CudaResult.INVALID_VALUE);
                try {
                    long e = m.allocate(pages * PAGE, 0);
                    fill(host, e, pages * PAGE, 5);
                    m.deallocate(e, 0);
                } catch (DriverException expected) {
                    // the planned fault
                }
                assertEquals(host.usage().aliveBytes(), m.stats().reservedBytes(), note);
                plan.clear();
                long e = m.allocate(pages * PAGE, 0);
                fill(host, e, pages * PAGE, 7);
                assertFullyIntact(host, e, pages * PAGE, 7, note);
                m.deallocate(e, 0);
            });
            failed += plan.injected(kind);
        }
        // One create and one map per handle; one setAccess for the whole run; unmaps only on rollback.
        long least = switch (kind) {
            case CREATE, MAP -> 3;
            case SET_ACCESS -> 1;
            default -> 0;
        };
        assertTrue(failed >= least, kind + ": the faults happened " + failed + " times");
    }

    private static void inScene(BiConsumer<HostDriver, VmmManager> body) {
        inScene(null, Map.of(), body);
    }

    private static void inScene(FaultPlan plan, Map<String, String> settings, BiConsumer<HostDriver, VmmManager> body) {
        inScene(plan, settings, false, body);
    }

    /**
     * Runs {@code body} on the scene (on a driver failing as {@code plan} says, when given), then
     * checks the scene's live block, the figures and that nothing leaks; {@code settings} are added
     * to the scene's own. {@code hintGivesRoom}: a peak hint leaves the budget room for the carved
     * requests, so the freed 64-page handle is given back rather than carved (see {@link #buildScene}).
     */
    private static void inScene(FaultPlan plan, Map<String, String> settings, boolean hintGivesRoom,
                                BiConsumer<HostDriver, VmmManager> body) {
        HostDriver host = hostDriver(32 * MIB);
        VmmDriver driver = plan == null ? host : new FaultInjectingDriver(host, plan);
        Map<String, String> all = new HashMap<>(Map.of("VMM_VA_SIZE", "64M", "VMM_SMALL_LIMIT", "0"));
        all.putAll(settings);
        try (VmmManager m = new VmmManager(driver, VmmConfig.from(all))) {
            long d2 = buildScene(host, m, hintGivesRoom);
            body.accept(host, m);
            assertFullyIntact(host, d2, 50 * PAGE, 3, "the scene's live 50-page block");
            m.drain();
            assertEquals(host.usage().aliveBytes(), m.stats().reservedBytes());
        } finally {
            assertTrue(host.usage().isEmpty(), "nothing leaks: " + host.usage());
            host.close();
        }
    }

    /**
     * The scene above; returns the live 50-page block in the first block's handle. Where a peak hint
     * gives the budget room, the freed 64-page handle (32 caps of 2 pages) is given back instead of
     * carved ({@link OversizedFreeHandles}): the 10 and 50 pages get new handles, and the live bytes
     * (114 pages after a peak of 128) are the same, with no partly live handle.
     */
    private static long buildScene(HostDriver host, VmmManager m, boolean hintGivesRoom) {
        long a = m.allocate(64 * PAGE, 0);
        long b = m.allocate(64 * PAGE, 0);
        assertEquals(2, created(m), "loading: one handle each");
        fill(host, b, 64 * PAGE, 2);
        m.deallocate(a, 0);
        long d1 = m.allocate(10 * PAGE, 0);
        long d2 = m.allocate(50 * PAGE, 0);
        if (hintGivesRoom) {
            fill(host, d2, 50 * PAGE, 3);
            m.deallocate(d1, 0);
            assertEquals(1, m.stats().driverHandles().handles(DriverCall.RELEASE), "the freed 64-page handle went back");
            assertEquals(114 * PAGE, m.stats().liveBytes());
            return d2;
        }
        assertEquals(a, d1, "carved from the freed block");
        assertEquals(a + 10 * PAGE, d2, "carved from the freed block");
        fill(host, d2, 50 * PAGE, 3);
        m.deallocate(d1, 0);
        assertEquals(2, created(m), "holes of 10 and 4 pages in a partly live handle");
        assertEquals(128 * PAGE, m.stats().reservedBytes());
        return d2;
    }
}
