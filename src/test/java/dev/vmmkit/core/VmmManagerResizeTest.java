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
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.lang.foreign.MemorySegment;
import java.util.Set;
import java.util.function.Consumer;
import java.lang.foreign.ValueLayout;

import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.PAGE;
import static dev.vmmkit.core.AllocatorTestSupport.assertFullyIntact;
import static dev.vmmkit.core.AllocatorTestSupport.fill;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static dev.vmmkit.core.AllocatorTestSupport.smallConfig;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Zero-copy resizing on the host emulation, with real bytes: growing in place, moving by remap or
 * by copy, the interposed-copy remap and what its source holds after, and driver failures at every
 * call of a grow and a remap.
 */
class VmmManagerResizeTest {
    /** A large request that is not a whole number of pages (the managers here round it, as VMM_ZERO_COPY=1 does). */
    private static final long SIZE = 20 * PAGE + 1000;

    /** A manager as VMM_ZERO_COPY=1 sets it up: every large request gets whole pages. */
    private static VmmManager manager(VmmDriver driver) {
        VmmManager m = VmmManager.withFenceOnCallingThread(driver, smallConfig(64 * MIB));
        m.useWholePagesFrom(0);
        return m;
    }

    @Test
    void growingIntoFreeSpaceKeepsTheAddressAndCopiesNothing() {
        try (HostDriver host = hostDriver(16 * MIB); VmmManager m = manager(host)) {
            long a = m.allocate(SIZE, 0);
            fill(host, a, SIZE, 1);
            long grown = m.reallocate(a, 3 * SIZE, 0);
            assertEquals(a, grown, "grew in place");
            assertFullyIntact(host, a, SIZE, 1, "after growing");
            fill(host, a, 3 * SIZE, 2); // every new byte is usable
            assertEquals(3 * SIZE, m.sizeOf(a));
            assertEquals(3 * SIZE, m.stats().liveBytes());
            assertEquals(0, host.copies());
            assertEquals(ZeroCopyStats.NONE, m.stats().zeroCopy());
            long shrunk = m.reallocate(a, SIZE + 5000, 0);
            assertEquals(a, shrunk, "shrank in place");
            assertFullyIntact(host, a, SIZE + 5000, 2, "after shrinking");
            assertEquals(SIZE + 5000, m.stats().liveBytes());
            long after = m.allocate(SIZE, 0); // the tail given back is reusable
            assertTrue(after >= a + SIZE + 5000, "placed after the shrunk allocation");
            m.deallocate(a, 0);
        }
    }

    @Test
    void growingPastANeighbourMovesThePagesByRemapping() {
        try (HostDriver host = hostDriver(16 * MIB)) {
            VmmManager m = manager(host);
            long a = m.allocate(SIZE, 0);
            long neighbour = m.allocate(SIZE, 0);
            fill(host, a, SIZE, 1);
            fill(host, neighbour, SIZE, 9);
            long moved = m.reallocate(a, 3 * SIZE, 0); // more than its headroom
            assertNotEquals(a, moved);
            assertFullyIntact(host, moved, SIZE, 1, "moved by remap");
            assertFullyIntact(host, neighbour, SIZE, 9, "neighbour");
            fill(host, moved, 3 * SIZE, 3);
            assertEquals(0, host.copies(), "no byte was copied");
            assertEquals(new ZeroCopyStats(1, SIZE, 0), m.stats().zeroCopy());
            assertEquals(-1, m.sizeOf(a), "the old address is freed");
            assertEquals(3 * SIZE + SIZE, m.stats().liveBytes());
            m.deallocate(moved, 0);
            m.deallocate(neighbour, 0);
            m.drain();
            m.close();
            assertTrue(host.usage().isEmpty(), "after close: " + host.usage());
        }
    }

    @Test
    void largeAllocationsHaveHeadroomToDoubleInPlace() {
        long big = RegionResizer.HEADROOM_FROM_PAGES * PAGE + 3000;
        try (HostDriver host = hostDriver(64 * MIB); VmmManager m = manager(host)) {
            long a = m.allocate(big, 0);
            long b = m.allocate(big, 0);
            long c = m.allocate(big, 0);
            fill(host, a, big, 1);
            fill(host, b, big, 2);
            assertEquals(a, m.reallocate(a, 2 * big, 0), "a doubled in place although b came after it");
            assertEquals(b, m.reallocate(b, 2 * big, 0), "so did b");
            assertFullyIntact(host, a, big, 1, "a");
            assertFullyIntact(host, b, big, 2, "b");
            fill(host, a, 2 * big, 3);
            fill(host, b, 2 * big, 4);
            assertEquals(0, host.copies());
            assertEquals(ZeroCopyStats.NONE, m.stats().zeroCopy());
            m.deallocate(c, 0);
        }
    }

    @Test
    void growingCopiesWhenTheCostModelSaysCopyingIsCheaper() {
        try (HostDriver host = hostDriver(16 * MIB); VmmManager m = manager(host)) {
            m.useResizeCosts(ResizeCostModel.CUDA); // small pages: ~29 us of driver calls each, copying is cheaper
            long a = m.allocate(SIZE, 0);
            long neighbour = m.allocate(SIZE, 0);
            fill(host, a, SIZE, 1);
            long moved = m.reallocate(a, 3 * SIZE, 0);
            assertNotEquals(a, moved);
            assertFullyIntact(host, moved, SIZE, 1, "moved by copy");
            assertEquals(1, host.copies());
            assertEquals(new ZeroCopyStats(0, 0, 1), m.stats().zeroCopy());
            m.deallocate(moved, 0);
            m.deallocate(neighbour, 0);
        }
    }

    @Test
    void smallAllocationsGrowAcrossSizeClassesByCopying() {
        try (HostDriver host = hostDriver(16 * MIB); VmmManager m = manager(host)) {
            long a = m.allocate(1000, 0);
            fill(host, a, 1000, 4);
            long b = m.reallocate(a, 3 * MIB, 0);
            assertFullyIntact(host, b, 1000, 4, "grown into the large region");
            long c = m.reallocate(b, 100, 0);
            assertFullyIntact(host, c, 100, 4, "shrunk into the small region");
            assertEquals(100, m.stats().liveBytes());
            m.deallocate(c, 0);
        }
    }

    @Test
    void aPointerVmmkitDidNotHandOutIsRefusedAndNothingChanges() {
        try (HostDriver host = hostDriver(16 * MIB); VmmManager m = manager(host)) {
            long a = m.allocate(SIZE, 0);
            AllocatorStats before = m.stats();
            assertThrows(InvalidAddressException.class, () -> m.reallocate(0x1000, SIZE, 0));
            assertThrows(InvalidAddressException.class, () -> m.reallocate(a + 512, SIZE, 0));
            assertThrows(IllegalArgumentException.class, () -> m.reallocate(a, 0, 0));
            assertEquals(before.liveBytes(), m.stats().liveBytes());
            assertEquals(before.allocations(), m.stats().allocations());
            assertEquals(SIZE, m.sizeOf(a));
        }
    }

    /** The seed's pattern: allocate bigger, copy the whole old buffer, free the old one. */
    @Test
    void aWholeBufferCopyBecomesARemapAndTheSourceAliasesTheDestinationUntilFreed() {
        try (HostDriver host = hostDriver(16 * MIB)) {
            VmmManager m = manager(host);
            long src = m.allocate(SIZE, 0);
            fill(host, src, SIZE, 5);
            long dst = m.allocate(2 * SIZE, 0);
            assertTrue(m.remapCopy(dst, src, SIZE, 0));
            assertFullyIntact(host, dst, SIZE, 5, "destination after the remap");
            assertFullyIntact(host, src, SIZE, 5, "source after the remap (an alias)");
            long original = word(dst, 8);
            word(dst, 8, 0x1234);
            assertEquals(0x1234, word(src, 8), "the source aliases the destination");
            word(dst, 8, original);
            assertEquals(0, host.copies());
            assertEquals(new ZeroCopyStats(1, SIZE, 0), m.stats().zeroCopy());

            m.deallocate(src, 0);
            m.drain();
            assertFalse(host.isAccessible(src, SIZE), "the freed alias is unmapped once its stream is idle");
            // New allocations never land on the alias's pages: the destination keeps its bytes.
            for (int i = 0; i < 4; i++) fill(host, m.allocate(SIZE, 0), SIZE, 100 + i);
            assertFullyIntact(host, dst, SIZE, 5, "destination after the source was freed and memory reused");
            m.close();
            assertTrue(host.usage().isEmpty(), "after close: " + host.usage());
        }
    }

    @Test
    void copiesThatAreNotAWholeBufferResizeStayCopies() {
        try (HostDriver host = hostDriver(16 * MIB); VmmManager m = manager(host)) {
            long src = m.allocate(SIZE, 0);
            long dst = m.allocate(2 * SIZE, 0);
            long smallDst = m.allocate(SIZE / 2, 0);
            long tiny = m.allocate(1000, 0);
            assertFalse(m.remapCopy(dst, src, SIZE - 8, 0), "part of the source");
            assertFalse(m.remapCopy(smallDst, src, SIZE, 0), "destination too small");
            assertFalse(m.remapCopy(dst + 512, src, SIZE, 0), "inside the destination");
            assertFalse(m.remapCopy(dst, tiny, 1000, 0), "small-region source shares its page");
            assertFalse(m.remapCopy(0x1000, src, SIZE, 0), "foreign destination: not counted");
            assertEquals(new ZeroCopyStats(0, 0, 4), m.stats().zeroCopy());
        }
    }

    @Test
    void aCopyWhoseStreamStillHasWorkQueuedStaysACopy() {
        try (HostDriver host = hostDriver(16 * MIB); VmmManager m = manager(host)) {
            long src = m.allocate(SIZE, 7);
            long dst = m.allocate(SIZE, 7);
            host.hostEvents().holdCompletion(true);
            assertFalse(m.remapCopy(dst, src, SIZE, 7), "earlier work on stream 7 may still use the destination");
            host.hostEvents().holdCompletion(false);
            host.hostEvents().completeAll();
            assertTrue(m.remapCopy(dst, src, SIZE, 7));
        }
    }

    @Test
    void aFreedAliasStaysMappedUntilItsStreamsEarlierWorkIsDone() {
        try (HostDriver host = hostDriver(16 * MIB); VmmManager m = manager(host)) {
            long src = m.allocate(SIZE, 3);
            fill(host, src, SIZE, 6);
            long dst = m.allocate(SIZE, 3);
            assertTrue(m.remapCopy(dst, src, SIZE, 3));
            host.hostEvents().holdCompletion(true);
            m.deallocate(src, 3);
            m.allocate(64 * MIB / 8, 0); // a slow path: looks at retired aliases
            assertTrue(host.isAccessible(src, SIZE), "work queued before the free may still read the source");
            host.hostEvents().holdCompletion(false);
            host.hostEvents().completeAll();
            m.drain();
            assertFalse(host.isAccessible(src, SIZE));
            assertFullyIntact(host, dst, SIZE, 6, "destination");
        }
    }

    /**
     * Every driver call of a grow in place, a move by remap and a remap copy fails once in turn: the
     * buffer and its neighbours stay whole. Each kind's fault must really fire in the scenarios that
     * make such calls. None of them releases a handle (freed handles go to the pool), so a failing
     * release is left to VmmManagerFaultTest, whose workload trims the pool.
     */
    @ParameterizedTest
    @EnumSource(value = DriverCall.class, names = {"CREATE", "MAP", "SET_ACCESS", "UNMAP", "EVENT_RECORD", "EVENT_QUERY"})
    void aFailingDriverCallInAGrowOrARemapLeavesBothBuffersValidAndLeaksNothing(DriverCall kind) {
        int[] fired = new int[3];
        for (int n = 1; n <= 6; n++) {
            for (int scenario = 0; scenario < 3; scenario++) {
                if (runWithOneFault(kind, n, scenario)) fired[scenario]++;
            }
        }
        // 0: grow in place (new handles mapped after the buffer), 1: move by remap (a's pages
        // unmapped once the work queued on them is done), 2: remap copy (a's pages into b).
        Set<Integer> reached = switch (kind) {
            case CREATE -> Set.of(0, 1); // the remap copy reuses a's handles
            case MAP, SET_ACCESS -> Set.of(0, 1, 2);
            default -> Set.of(1, 2); // UNMAP and events: a grow in place leaves every mapping as it was
        };
        for (int scenario : reached) {
            assertTrue(fired[scenario] > 0, kind + ": no fault fired in scenario " + scenario + " at positions 1..6");
        }
    }

    /** Returns whether the fault fired (the operation made at least {@code n} calls of {@code kind}). */
    private static boolean runWithOneFault(DriverCall kind, int n, int scenario) {
        String note = kind + " #" + n + " fails, scenario " + scenario;
        try (HostDriver host = hostDriver(16 * MIB)) {
            FaultPlan plan = new FaultPlan(n);
            VmmManager m = manager(new FaultInjectingDriver(host, plan));
            long a = m.allocate(SIZE, 0);
            long b = m.allocate(2 * SIZE, 0);
            fill(host, a, SIZE, 11);
            fill(host, b, 2 * SIZE, 12);
            plan.failNth(kind, n, CudaResult.OUT_OF_MEMORY);
            long liveA = a;
            long sizeA = SIZE;
            boolean aliased = false;
            try {
                switch (scenario) {
                    case 0 -> { // grow b in place
                        long grown = m.reallocate(b, 4 * SIZE, 0);
                        assertEquals(b, grown, note);
                        assertFullyIntact(host, b, 2 * SIZE, 12, note + ": grown in place");
                    }
                    case 1 -> { // move a past b by remap
                        liveA = m.reallocate(a, 3 * SIZE, 0);
                        sizeA = 3 * SIZE;
                    }
                    default -> aliased = m.remapCopy(b, a, SIZE, 0); // the seed's pattern
                }
            } catch (DriverException | OutOfDeviceMemoryException e) {
                // allowed: the buffers must be as they were
            }
            boolean fired = plan.injected(kind) > 0;
            plan.clear();
            assertFullyIntact(host, liveA, SIZE, 11, note + ": a");
            if (aliased) {
                assertFullyIntact(host, b, SIZE, 11, note + ": b took a's pages");
            } else {
                assertFullyIntact(host, b, 2 * SIZE, 12, note + ": b");
            }
            assertEquals(host.usage().aliveBytes(), m.stats().reservedBytes(), note + ": physical bytes equal the driver's");
            fill(host, liveA, sizeA, 13);
            m.deallocate(liveA, 0);
            m.deallocate(b, 0);
            assertEquals(0, m.stats().liveBytes(), note);
            m.drain();
            m.close();
            assertTrue(host.usage().isEmpty(), note + ": after close the driver still holds " + host.usage());
            return fired;
        }
    }

    /**
     * A remap copy whose grant of access at the destination fails, and one of whose undoing unmaps
     * fails too: the source's handle left mapped at the destination is not released while that
     * mapping lasts, nor is any of the destination's handles it gave up lost (see
     * {@link #aRemapThatFailsTwice}).
     */
    @ParameterizedTest(name = "undoing unmap #{0} fails")
    @ValueSource(ints = {1, 2, 5})
    void aRemapWhoseGrantAndUndoingUnmapFailReleasesNoHandleStillMapped(int undoing) {
        // The first unmap takes the destination's own handles off; the next ones undo the source's maps.
        aRemapThatFailsTwice(plan -> plan.failNth(DriverCall.SET_ACCESS, 1, CudaResult.OUT_OF_MEMORY)
                .failNth(DriverCall.UNMAP, 1 + undoing, CudaResult.INVALID_VALUE), "undoing unmap #" + undoing + " fails");
    }

    /** A remap copy whose grant fails, and so does the grant that maps the destination's own handles back. */
    @Test
    void aRemapWhoseGrantFailsAndThenTheGrantPuttingThePagesBackFails() {
        aRemapThatFailsTwice(plan -> plan.failAlways(DriverCall.SET_ACCESS, CudaResult.OUT_OF_MEMORY), "both grants fail");
    }

    /**
     * Two failures in one remap leave the destination without its first pages: the caller is told
     * (a copy there would fault the device), the destination can only be freed, and its free gives
     * every page back, its own pages past the remap included, so that after a drain the driver
     * holds nothing and a new allocation can be placed anywhere; the figures stay equal to the
     * driver's throughout.
     */
    private static void aRemapThatFailsTwice(Consumer<FaultPlan> faults, String note) {
        try (HostDriver host = hostDriver(16 * MIB)) {
            FaultPlan plan = new FaultPlan();
            VmmManager m = manager(new FaultInjectingDriver(host, plan));
            long a = m.allocate(SIZE, 0);
            long b = m.allocate(3 * SIZE, 0); // pages of its own well past the copy
            fill(host, a, SIZE, 11);
            fill(host, b, 3 * SIZE, 12);
            faults.accept(plan); // counted from here: the remap's calls
            RemapLostPagesException lost = assertThrows(RemapLostPagesException.class, () -> m.remapCopy(b, a, SIZE, 0), note);
            assertEquals(b, lost.address(), note);
            assertTrue(lost.isOutOfMemory(), note + ": the failed grant's out of memory, which the shim returns as cudaErrorMemoryAllocation");
            assertEquals(2, plan.injected(DriverCall.SET_ACCESS) + plan.injected(DriverCall.UNMAP), note + ": two faults fired");
            plan.clear();
            assertFullyIntact(host, a, SIZE, 11, note + ": the source keeps its bytes");
            assertThrows(InvalidAddressException.class, () -> m.reallocate(b, 4 * SIZE, 0), note + ": only a free");
            assertFalse(m.remapCopy(b, a, SIZE, 0), note + ": no second remap into it");
            assertEquals(host.usage().aliveBytes(), m.stats().reservedBytes(), note + ": physical bytes equal the driver's");
            m.deallocate(a, 0);
            m.drain();
            assertEquals(host.usage().aliveBytes(), m.stats().reservedBytes(), note + ": after the source's free");
            m.deallocate(b, 0);
            m.drain();
            assertEquals(0, m.stats().liveBytes(), note);
            assertEquals(0, host.usage().aliveBytes(), note + ": after a drain no handle is left: " + host.usage());
            assertEquals(0, m.stats().reservedBytes(), note);
            long c = m.allocate(4 * SIZE, 0); // where the destination was, if the placement likes
            fill(host, c, 4 * SIZE, 13);
            assertFullyIntact(host, c, 4 * SIZE, 13, note + ": a new allocation");
            m.deallocate(c, 0);
            m.drain();
            m.close();
            assertTrue(host.usage().isEmpty(), note + ": after close the driver still holds " + host.usage());
        }
    }

    private static long word(long address, long offset) {
        return MemorySegment.ofAddress(address + offset).reinterpret(8).get(ValueLayout.JAVA_LONG, 0);
    }

    private static void word(long address, long offset, long value) {
        MemorySegment.ofAddress(address + offset).reinterpret(8).set(ValueLayout.JAVA_LONG, 0, value);
    }
}
