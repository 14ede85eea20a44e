package dev.vmmkit.core;

import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.lang.management.ManagementFactory;
import java.util.Map;

import static dev.vmmkit.core.AllocatorTestSupport.KIB;
import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static dev.vmmkit.core.AllocatorTestSupport.smallConfig;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * An allocation served from mapped free memory calls no driver function and allocates nothing on
 * the Java heap: a hit in either size class, and a small request placed in the large region's free
 * block at the budget ({@link SmallRequestOverflow}).
 */
class VmmManagerHotPathTest {
    private static final int PAIRS = 20_000;
    /** Far less than one object per pair; the counter itself may cost a few bytes. */
    private static final long HEAP_BYTES_ALLOWED = 4 * KIB;

    private final com.sun.management.ThreadMXBean threads =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    private HostDriver host;
    private VmmManager m;

    private void open(double slack) {
        host = hostDriver(64 * MIB);
        m = new VmmManager(host, smallConfig(64 * MIB).withReserveSlack(slack));
    }

    @AfterEach
    void close() {
        if (m != null) m.close();
        if (host != null) host.close();
    }

    /** Runs {@code PAIRS} allocate+free pairs of {@code size} on stream 1; checks driver calls and heap bytes. */
    private void assertPairsAreFree(long size, String what) {
        for (int i = 0; i < 2_000; i++) m.deallocate(m.allocate(size, 1), 1); // warm up
        Map<DriverCall, Long> calls = m.stats().driverCalls();
        long before = threads.getCurrentThreadAllocatedBytes();
        for (int i = 0; i < PAIRS; i++) m.deallocate(m.allocate(size, 1), 1);
        long heap = threads.getCurrentThreadAllocatedBytes() - before;
        assertEquals(calls, m.stats().driverCalls(), what + ": no driver call");
        assertTrue(heap < HEAP_BYTES_ALLOWED, what + ": " + heap + " heap bytes for " + PAIRS + " pairs");
    }

    @Test
    void cacheHitsInBothSizeClassesCallNoDriverFunctionAndAllocateNothing() {
        open(VmmConfig.DEFAULTS.reserveSlack());
        assertPairsAreFree(4 * KIB, "small request");
        assertPairsAreFree(3 * MIB, "large request");
    }

    @Test
    void aSmallRequestPlacedInTheLargeRegionAtTheBudgetCallsNoDriverFunctionAndAllocatesNothing() {
        open(1.0);
        m.deallocate(m.allocate(4 * MIB, 1), 1);
        // More than a page (64 KiB here): the small region would have to map one past the budget.
        long probe = m.allocate(100 * KIB, 1);
        assertFalse(m.isSmall(m.regionOf(probe)), "the request overflows into the large region");
        m.deallocate(probe, 1);
        assertPairsAreFree(100 * KIB, "small request in the large region");
    }
}
