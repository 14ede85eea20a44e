package dev.vmmkit.core;

import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.FaultInjectingDriver;
import dev.vmmkit.driver.FaultPlan;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import static dev.vmmkit.core.AllocatorTestSupport.PAGE;
import static dev.vmmkit.core.AllocatorTestSupport.assertFullyIntact;
import static dev.vmmkit.core.AllocatorTestSupport.fill;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The page table with handles of several pages: runs, whole-handle ranges, rollback, moves. */
class PageTableTest {
    private static final long SPAN = 32 * PAGE;

    private HostDriver host;
    private FaultPlan plan;
    private long base;
    private PageTable table;

    @BeforeEach
    void open() {
        host = hostDriver(64 * PAGE);
        plan = new FaultPlan();
        FaultInjectingDriver driver = new FaultInjectingDriver(host, plan);
        base = driver.reserve(SPAN, PAGE);
        table = new PageTable(driver, base, SPAN, PAGE);
    }

    @AfterEach
    void close() {
        plan.clear();
        table.unmapAll((handle, bytes) -> host.release(handle));
        host.addressFree(base, SPAN);
        assertTrue(host.usage().isEmpty(), "nothing left: " + host.usage());
        host.close();
    }

    /** Handles of 2, 1 and 3 pages. */
    private HandleRun run(long... pagesEach) {
        HandleRun run = new HandleRun();
        for (long pages : pagesEach) run.add(host.create(pages * PAGE), pages * PAGE);
        return run;
    }

    @Test
    void aRunOfHandlesOfSeveralPagesIsRecordedHandleByHandle() {
        table.mapRun(base + PAGE, run(2, 1, 3));
        assertTrue(host.isAccessible(base + PAGE, 6 * PAGE));
        assertEquals(3, table.handlesIn(base, SPAN + base));
        assertEquals(base + PAGE, table.handleStart(base + 2 * PAGE));
        assertEquals(base + 3 * PAGE, table.handleEnd(base + 2 * PAGE));
        assertEquals(base + 7 * PAGE, table.handleEnd(base + 5 * PAGE));
        long[] range = new long[2];
        table.wholeHandlesWithin(base + PAGE + 100, base + 6 * PAGE, range);
        assertArrayEquals(new long[]{base + 3 * PAGE, base + 4 * PAGE}, range, "only the 1-page handle lies wholly inside");
        table.wholeHandlesWithin(base + PAGE, base + 7 * PAGE, range);
        assertArrayEquals(new long[]{base + PAGE, base + 7 * PAGE}, range);
    }

    @Test
    void unmapRangeHandsBackWholeHandles() {
        table.mapRun(base, run(2, 1, 3));
        HandleRun out = new HandleRun();
        table.unmapRange(base + 2 * PAGE, base + 6 * PAGE, out);
        assertEquals(2, out.count());
        assertEquals(PAGE, out.bytes(0));
        assertEquals(3 * PAGE, out.bytes(1));
        assertFalse(table.isMapped(base + 2 * PAGE));
        assertTrue(table.isMapped(base + PAGE));
        assertFalse(host.isAccessible(base + 2 * PAGE, PAGE));
        for (int i = 0; i < out.count(); i++) host.release(out.handle(i));
    }

    @Test
    void aFailedMapLeavesNothingMapped() {
        plan.failNth(DriverCall.MAP, 3, CudaResult.OUT_OF_MEMORY);
        HandleRun run = run(2, 1, 3);
        assertThrows(DriverException.class, () -> table.mapRun(base, run));
        assertEquals(0, table.handlesIn(base, base + SPAN));
        assertEquals(0, host.usage().mappings(), "the driver maps nothing either");
        for (int i = 0; i < run.count(); i++) host.release(run.handle(i));
    }

    @Test
    void aRollbackUnmapThatFailsLeavesThatHandleRecordedAsMapped() {
        plan.failNth(DriverCall.SET_ACCESS, 1, CudaResult.OUT_OF_MEMORY).failNth(DriverCall.UNMAP, 1, CudaResult.INVALID_VALUE);
        HandleRun run = run(2, 1);
        assertThrows(DriverException.class, () -> table.mapRun(base, run));
        assertTrue(table.isMapped(base), "the stuck 2-page handle is still mapped in the driver and in the table");
        assertFalse(table.isMapped(base + 2 * PAGE));
        assertEquals(1, host.usage().mappings());
        host.release(run.handle(1));
    }

    @Test
    void moveMappingKeepsTheBytes() {
        table.mapRun(base, run(2, 1));
        fill(host, base, 3 * PAGE, 7);
        table.moveMapping(base, base + 10 * PAGE, 3 * PAGE);
        assertFalse(table.isMapped(base));
        assertEquals(2, table.handlesIn(base + 10 * PAGE, base + 13 * PAGE));
        assertFullyIntact(host, base + 10 * PAGE, 3 * PAGE, 7, "moved");
    }
}
