package dev.vmmkit.core;

import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.FaultInjectingDriver;
import dev.vmmkit.driver.FaultPlan;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.PAGE;
import static dev.vmmkit.core.AllocatorTestSupport.assertFullyIntact;
import static dev.vmmkit.core.AllocatorTestSupport.fill;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The cold path: while a program loads (it has freed almost nothing of what it allocated), a
 * large request (more than 16 pages) backed from nothing gets one handle for the pages it alone
 * fills, as native cudaMalloc makes one allocation; once memory is recycled, new handles are
 * capped again, so free pages stay
 * movable. Everything in the large region (P = one page); the handle counts follow from the rules
 * in {@link HandleSupply} and {@link HandleSizer}.
 */
class VmmManagerColdPathTest {
    private static VmmConfig config() {
        return VmmConfig.from(Map.of("VMM_VA_SIZE", "64M", "VMM_SMALL_LIMIT", "0"));
    }

    private static long created(VmmManager m) {
        return m.stats().driverHandles().handles(DriverCall.CREATE);
    }

    private static long mapped(VmmManager m) {
        return m.stats().driverHandles().handles(DriverCall.MAP);
    }

    @Test
    void aLoadingProgramGetsOneHandlePerLargeRequest() {
        HostDriver host = hostDriver(32 * MIB);
        try (VmmManager m = new VmmManager(host, config())) {
            long a = m.allocate(24 * PAGE, 0);
            assertEquals(1, created(m), "24 pages from nothing: one handle");
            long b = m.allocate(20 * PAGE, 0);
            assertEquals(2, created(m), "20 more pages: one more handle");
            long c = m.allocate(18 * PAGE + 512, 0);
            assertEquals(4, created(m), "18 whole pages in one handle, the shared last page in one of its own");
            // Not large (16 pages or fewer): capped handles, one page each for a peak of 71 pages.
            long d = m.allocate(8 * PAGE, 0);
            assertEquals(4 + 8, created(m), "a mid-sized request while loading: capped handles");
            assertEquals(created(m), mapped(m), "each handle mapped once");
            fill(host, a, 24 * PAGE, 1);
            fill(host, b, 20 * PAGE, 2);
            fill(host, c, 18 * PAGE + 512, 3);
            fill(host, d, 8 * PAGE, 4);
            assertFullyIntact(host, b, 20 * PAGE, 2, "b");
            assertFullyIntact(host, c, 18 * PAGE + 512, 3, "c");
            assertEquals(host.usage().aliveBytes(), m.stats().reservedBytes());
        } finally {
            assertTrue(host.usage().isEmpty(), "nothing leaks: " + host.usage());
            host.close();
        }
    }

    @Test
    void onceMemoryIsRecycledNewHandlesAreCappedAgain() {
        HostDriver host = hostDriver(32 * MIB);
        try (VmmManager m = new VmmManager(host, config())) {
            long a = m.allocate(64 * PAGE, 0);
            assertEquals(1, created(m));
            m.deallocate(a, 0);
            // 128 pages: the 64 free ones below, and 64 new ones, which the budget has room for. The
            // region freed all it allocated, so it no longer loads: the cap of a 128-page peak is
            // 128/64 = 2 pages, so 32 handles.
            long b = m.allocate(128 * PAGE, 0);
            assertEquals(a, b, "the request grew the free block below it");
            assertEquals(1 + 32, created(m));
            fill(host, b, 128 * PAGE, 9);
            assertFullyIntact(host, b, 128 * PAGE, 9, "b");
        } finally {
            assertTrue(host.usage().isEmpty(), "nothing leaks: " + host.usage());
            host.close();
        }
    }

    @Test
    void aNeighbourOnTheSharedLastPageNeverPinsTheLargeHandle() {
        HostDriver host = hostDriver(32 * MIB);
        try (VmmManager m = new VmmManager(host, config())) {
            long x = m.allocate(20 * PAGE + 512, 0);
            long y = m.allocate(512, 0);
            assertEquals(x + 20 * PAGE + 512, y, "the neighbour lands on x's last page, already mapped");
            assertEquals(2, created(m));
            m.deallocate(x, 0);
            m.drain();
            assertEquals(PAGE, m.stats().reservedBytes(), "x's 20-page handle was released; only y's page stays");
            assertEquals(PAGE, host.usage().aliveBytes());
            m.deallocate(y, 0);
        } finally {
            assertTrue(host.usage().isEmpty(), "nothing leaks: " + host.usage());
            host.close();
        }
    }

    @Test
    void aFixedCapHoldsWhileLoadingToo() {
        HostDriver host = hostDriver(32 * MIB);
        VmmConfig capped = config().withHandleCapBytes(2 * PAGE);
        try (VmmManager m = new VmmManager(host, capped)) {
            m.allocate(8 * PAGE, 0);
            assertEquals(4, created(m));
        } finally {
            host.close();
        }
    }

    /**
     * A loading program under one fault at the Nth call of a kind: a request may fail, but the
     * allocator's figures stay equal to the driver's, the loaded bytes stay intact, loading goes
     * on with one handle per request once the faults stop, and closing leaves nothing behind.
     */
    @ParameterizedTest(name = "{0} fails while loading")
    @EnumSource(value = DriverCall.class, names = {"CREATE", "MAP", "SET_ACCESS", "RESERVE"})
    void aFaultWhileLoadingLeavesTheAllocatorConsistent(DriverCall kind) {
        long[] sizes = {8 * PAGE, 20 * PAGE, 3 * PAGE + 512, 5 * PAGE, 12 * PAGE + 4096};
        int injected = 0;
        for (int n = 1; n <= 6; n++) {
            String note = kind + " #" + n;
            HostDriver host = hostDriver(32 * MIB);
            FaultPlan plan = new FaultPlan(n).failNth(kind, n, CudaResult.OUT_OF_MEMORY);
            try (VmmManager m = new VmmManager(new FaultInjectingDriver(host, plan), config())) {
                List<long[]> live = new ArrayList<>(); // address, size, seed
                for (int i = 0; i < sizes.length; i++) {
                    try {
                        long address = m.allocate(sizes[i], 0);
                        fill(host, address, sizes[i], i);
                        live.add(new long[]{address, sizes[i], i});
                    } catch (DriverException | OutOfDeviceMemoryException e) {
                        // the planned fault
                    }
                    assertEquals(host.usage().aliveBytes(), m.stats().reservedBytes(), note + ", request " + i);
                }
                injected += plan.injected(kind) > 0 ? 1 : 0;
                plan.clear();
                long before = created(m);
                long more = m.allocate(40 * PAGE, 0);
                // Its whole pages in one handle, and a last page shared with the request before it
                // (which ended inside a page) in another; capped handles would be one a page here.
                assertTrue(created(m) - before <= 2, note + ": still loading, " + (created(m) - before) + " handles");
                fill(host, more, 40 * PAGE, 99);
                for (long[] l : live) assertFullyIntact(host, l[0], l[1], l[2], note);
                assertEquals(host.usage().aliveBytes(), m.stats().reservedBytes(), note);
            } finally {
                assertTrue(host.usage().isEmpty(), note + ": nothing leaks: " + host.usage());
                host.close();
            }
        }
        assertTrue(injected >= (kind == DriverCall.RESERVE ? 1 : 4), kind + ": the faults happened " + injected + " times");
    }

    /**
     * The second block beside one that waits for another stream's work, under one fault at the Nth
     * call of a kind: the request may fail, but the waiting block is never handed out before its
     * stream's work completed, the figures stay equal to the driver's, and nothing leaks.
     */
    @ParameterizedTest(name = "{0} fails beside a waiting block")
    @EnumSource(value = DriverCall.class, names = {"CREATE", "MAP", "SET_ACCESS", "EVENT_RECORD", "EVENT_QUERY"})
    void aFaultBesideAWaitingBlockLeavesTheAllocatorConsistent(DriverCall kind) {
        long size = 24 * PAGE;
        int injected = 0;
        for (int n = 1; n <= 3; n++) {
            String note = kind + " #" + n;
            HostDriver host = hostDriver(32 * MIB);
            host.hostEvents().holdCompletion(true); // stream 1's work keeps running
            FaultPlan plan = new FaultPlan(n);
            try (VmmManager m = new VmmManager(new FaultInjectingDriver(host, plan), config())) {
                long a = m.allocate(size, 1);
                fill(host, a, size, 5);
                m.deallocate(a, 1);
                // Not out-of-memory: its recovery waits for every pending free (the driver
                // synchronises stream 1), after which reusing the block is right.
                plan.failNth(kind, n, CudaResult.INVALID_VALUE);
                long b = 0;
                try {
                    b = m.allocate(size, 2);
                    assertTrue(b + size <= a || a + size <= b, note + ": the waiting block was handed out");
                    fill(host, b, size, 6);
                } catch (DriverException | OutOfDeviceMemoryException e) {
                    // the planned fault
                }
                injected += plan.injected(kind) > 0 ? 1 : 0;
                plan.clear();
                assertFullyIntact(host, a, size, 5, note + ": the waiting block is untouched");
                assertEquals(host.usage().aliveBytes(), m.stats().reservedBytes(), note);
                host.hostEvents().completeStream(1);
                long c = m.allocate(size, 3);
                fill(host, c, size, 7);
                if (b != 0) assertFullyIntact(host, b, size, 6, note);
                assertEquals(host.usage().aliveBytes(), m.stats().reservedBytes(), note);
            } finally {
                assertTrue(host.usage().isEmpty(), note + ": nothing leaks: " + host.usage());
                host.close();
            }
        }
        assertTrue(injected >= 1, kind + ": the fault never happened");
    }
}
