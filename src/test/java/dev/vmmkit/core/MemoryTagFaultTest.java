package dev.vmmkit.core;

import dev.vmmkit.core.MemoryTagPauseTest.Block;
import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.FaultInjectingDriver;
import dev.vmmkit.driver.FaultPlan;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.EnumSource;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import static dev.vmmkit.core.AllocatorTestSupport.KIB;
import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.PAGE;
import static dev.vmmkit.core.AllocatorTestSupport.assertFullyIntact;
import static dev.vmmkit.core.AllocatorTestSupport.fill;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static dev.vmmkit.core.AllocatorTestSupport.smallConfig;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A driver call failing at every position of a pause and of a resume: the call says so, the tag
 * stays consistent (the allocator's figures equal the driver's, every range it still maps holds
 * its bytes), calling the operation again finishes it, and the kept contents come back intact.
 * Also with one page per handle, so that blocks span handles that a kept tag's pause releases one
 * by one as their copies land.
 */
class MemoryTagFaultTest {
    private static final int MAX_N = 6;

    @ParameterizedTest(name = "{0} fails")
    @EnumSource(value = DriverCall.class, names = {"DEVICE_SYNCHRONIZE", "PINNED_ALLOCATE", "PINNED_FREE", "STREAM_CREATE",
            "STREAM_DESTROY", "COPY_TO_HOST", "COPY_TO_DEVICE", "EVENT_CREATE", "EVENT_RECORD", "EVENT_SYNCHRONIZE",
            "EVENT_DESTROY", "UNMAP", "RELEASE", "CREATE", "MAP", "SET_ACCESS"})
    void aFailureAnywhereInPauseOrResumeLeavesTheTagConsistentAndRetryable(DriverCall kind) throws InterruptedException {
        int injected = 0;
        for (int n = 1; n <= MAX_N; n++) {
            for (boolean goBack : new boolean[]{false, true}) {
                for (boolean pinAhead : new boolean[]{false, true}) {
                    for (long handleCap : new long[]{0, PAGE}) injected += runWithFault(kind, n, goBack, pinAhead, handleCap);
                }
            }
        }
        assertTrue(injected > 0, kind + ": no fault reached a pause or a resume");
    }

    /** Returns how many faults were injected. */
    private static int runWithFault(DriverCall kind, int n, boolean goBack, boolean pinAhead, long handleCap)
            throws InterruptedException {
        String note = kind + " #" + n + (goBack ? ", then the other operation" : ", then the same again")
                + (pinAhead ? ", host memory pinned ahead" : "") + (handleCap != 0 ? ", one page per handle" : "");
        HostDriver host = hostDriver(16 * MIB);
        FaultPlan plan = new FaultPlan(n);
        try (VmmManager m = VmmManager.withFenceOnCallingThread(new FaultInjectingDriver(host, plan),
                smallConfig(16 * MIB).withHandleCapBytes(handleCap))) {
            m.beginTagRegion("weights", true);
            List<Block> weights = new ArrayList<>();
            long[] sizes = {600 * KIB, 3 * KIB, 2 * MIB, 100, 700 * KIB, 1 * MIB + 3, 64 * KIB};
            for (int i = 0; i < sizes.length; i++) {
                long a = m.allocate(sizes[i], 0);
                fill(host, a, sizes[i], 31L * n + i);
                weights.add(new Block(a, sizes[i], 31L * n + i));
            }
            // A hole in the middle: the tag's memory is several runs of mapped pages.
            long hole = weights.get(2).address();
            m.deallocate(hole, 0);
            weights.remove(2);
            m.endTagRegion();
            m.drain();
            m.beginTagRegion("cache", false);
            long cache = m.allocate(1 * MIB, 0);
            m.endTagRegion();

            if (pinAhead) {
                // The pause finds its host memory pinned already and pins nothing itself.
                m.usePinAhead(Long.MAX_VALUE);
                m.awaitPinAhead();
                assertTrue(m.stats().tags().hostBytesKept() > 0, note + ": pinned ahead");
            }
            int faults = 0;
            plan.failNth(kind, n, CudaResult.OUT_OF_MEMORY);
            try {
                m.pause(null);
            } catch (TagTransitionException e) {
                faults++;
                assertTrue(e.getMessage().contains("consistent"), e.getMessage());
                checkConsistent(m, host, weights, note + ", after the failed pause");
                if (goBack) {
                    m.resume(null);
                    checkConsistent(m, host, weights, note + ", resumed after the failed pause");
                }
                m.pause(null);
            }
            plan.clear();
            assertCaptureMayBegin(m, note + ", after the pause");
            assertTrue(m.stats().tags().pausedBytes() > 0, note + ": paused");
            for (Block b : weights) assertTrue(!host.isAccessible(b.address(), b.size()), note + ": paused memory is unmapped");

            plan.failNth(kind, n, CudaResult.OUT_OF_MEMORY);
            try {
                m.resume(null);
            } catch (TagTransitionException e) {
                faults++;
                // Ranges mapped again wait for their copies: only the figures can be checked.
                assertEquals(host.usage().aliveBytes(), m.stats().reservedBytes(), note + ": figures equal the driver's");
                if (goBack) {
                    m.pause(null);
                    checkConsistent(m, host, weights, note + ", paused after the failed resume");
                }
                m.resume(null);
            }
            try {
                m.freeKeptHostMemory(); // under the plan too
            } catch (DriverException refused) {
                // the refused chunks stay kept; close frees them
            }
            plan.clear();
            assertCaptureMayBegin(m, note + ", after the resume");
            for (Block b : weights) assertFullyIntact(host, b.address(), b.size(), b.seed(), note + ", after the resume");
            fill(host, cache, 1 * MIB, 5);
            assertEquals(host.usage().aliveBytes(), m.stats().reservedBytes(), note + ": figures equal the driver's");
            // The tag allocates again.
            m.beginTagRegion("weights", true);
            long again = m.allocate(3 * PAGE, 0);
            fill(host, again, 3 * PAGE, 1);
            m.endTagRegion();
            for (Block b : weights) m.deallocate(b.address(), 0);
            m.deallocate(cache, 0);
            m.deallocate(again, 0);
            // A failed release, stream destroy or free of a host copy does not fail the operation:
            // the handle is released later, the copy's memory stays with the process.
            return faults > 0 || plan.injected(kind) > 0 ? 1 : 0;
        } finally {
            assertTrue(host.usage().isEmpty() || host.usage().aliveBytes() == 0, note + ": after close the driver still holds " + host.usage());
            host.close();
        }
    }

    /**
     * A stream capture can begin: a pause or resume that failed partway left no call counted as
     * running beside captures ({@link StreamCaptures}), which would hold every capture back.
     */
    private static void assertCaptureMayBegin(VmmManager m, String note) {
        assertTimeoutPreemptively(Duration.ofSeconds(30), () -> m.streamCaptures().beginning(), note + ": a capture begins");
        m.streamCaptures().ended();
    }

    /** The figures equal the driver's; every allocation still mapped holds its bytes. */
    private static void checkConsistent(VmmManager m, HostDriver host, List<Block> weights, String note) {
        assertEquals(host.usage().aliveBytes(), m.stats().reservedBytes(), note + ": figures equal the driver's");
        for (Block b : weights) {
            if (host.isAccessible(b.address(), b.size())) assertFullyIntact(host, b.address(), b.size(), b.seed(), note);
        }
    }

    /**
     * A resume whose grant of access fails, and whose undoing unmap fails too, leaves the run
     * mapped without access: the next resume grants it before the tag runs again, so no block of
     * the tag is handed out, or read, where the device may not touch it. A pause instead gives it
     * back as it gives back any run a failed resume mapped.
     */
    @ParameterizedTest(name = "contents kept: {0}, then {1}")
    @CsvSource({"false, resume", "true, resume", "false, pause", "true, pause"})
    void aRunLeftMappedWithoutAccessIsGrantedBeforeTheTagRunsAgain(boolean keep, String then) {
        HostDriver host = hostDriver(16 * MIB);
        FaultPlan plan = new FaultPlan();
        try (VmmManager m = VmmManager.withFenceOnCallingThread(new FaultInjectingDriver(host, plan), smallConfig(16 * MIB))) {
            m.beginTagRegion("cache", keep);
            long block = m.allocate(1 * MIB, 0);
            fill(host, block, 1 * MIB, 17);
            m.endTagRegion();
            m.pause("cache");
            plan.failNth(DriverCall.SET_ACCESS, 1, CudaResult.OUT_OF_MEMORY).failNth(DriverCall.UNMAP, 1, CudaResult.INVALID_VALUE);
            assertThrows(TagTransitionException.class, () -> m.resume("cache"));
            plan.clear();
            assertEquals(host.usage().aliveBytes(), m.stats().reservedBytes(), "figures equal the driver's");
            if (then.equals("pause")) {
                m.pause("cache");
                assertEquals(host.usage().aliveBytes(), m.stats().reservedBytes(), "figures equal the driver's when paused");
                m.resume("cache");
            } else {
                m.resume("cache");
            }
            assertTrue(host.isAccessible(block, 1 * MIB), "the tag's block is mapped with access after the resume");
            if (keep) assertFullyIntact(host, block, 1 * MIB, 17, "kept contents after the resume");
            m.beginTagRegion("cache", keep);
            long next = m.allocate(1 * MIB + 5, 0);
            fill(host, next, 1 * MIB + 5, 18);
            m.endTagRegion();
            m.deallocate(next, 0);
            m.deallocate(block, 0);
            m.freeKeptHostMemory();
        } finally {
            HostDriver.Usage usage = host.usage();
            host.close();
            assertTrue(usage.isEmpty() || usage.aliveBytes() == 0, "after close the driver holds " + usage);
        }
    }

    @Test
    void aResumeWithoutMemoryFailsAndSucceedsOnceTheMemoryIsBack() {
        HostDriver host = hostDriver(8 * MIB);
        try (VmmManager m = new VmmManager(host, smallConfig(16 * MIB))) {
            m.beginTagRegion("weights", true);
            long w = m.allocate(3 * MIB, 0);
            fill(host, w, 3 * MIB, 8);
            m.endTagRegion();
            m.pause("weights");
            long other = m.allocate(7 * MIB, 0); // only fits because the weights gave their pages back
            TagTransitionException e = assertThrows(TagTransitionException.class, () -> m.resume("weights"));
            assertTrue(e.isOutOfMemory(), e.getMessage());
            assertEquals(host.usage().aliveBytes(), m.stats().reservedBytes());
            m.beginTagRegion("weights", true);
            assertThrows(TagPausedException.class, () -> m.allocate(1, 0));
            m.endTagRegion();
            m.deallocate(other, 0);
            m.drain();
            m.resume("weights");
            assertFullyIntact(host, w, 3 * MIB, 8, "weights after the retried resume");
            m.freeKeptHostMemory();
        } finally {
            host.close();
        }
    }
}
