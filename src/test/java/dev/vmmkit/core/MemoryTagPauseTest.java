package dev.vmmkit.core;

import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.HostTransfers;
import dev.vmmkit.driver.TimingDriver;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;

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
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Pause and resume of memory tags on the host emulation, with real bytes: weights kept, a KV cache
 * discarded, the released memory used by something else under a small device, and the weights
 * found intact at the same addresses after the resume.
 */
class MemoryTagPauseTest {
    private static final long CAPACITY = 8 * MIB;

    record Block(long address, long size, long seed) {
    }

    /** Mixed sizes, as a model's weights are: small biases beside multi-page matrices. */
    static List<Block> allocateFilled(VmmManager m, HostDriver host, long[] sizes, long seedBase) {
        List<Block> out = new ArrayList<>();
        for (int i = 0; i < sizes.length; i++) {
            long a = m.allocate(sizes[i], 0);
            fill(host, a, sizes[i], seedBase + i);
            out.add(new Block(a, sizes[i], seedBase + i));
        }
        return out;
    }

    static final long[] WEIGHTS = {3 * KIB, 700 * KIB, 40, 1 * MIB + 5, 96 * KIB, 513, 300 * KIB};
    static final long[] KV = {1 * MIB, 1 * MIB, 512 * KIB};

    @Test
    void weightsKeptAndCacheDiscardedGiveTheirMemoryToAnotherPhaseAndComeBackAtTheSameAddresses() {
        HostDriver host = hostDriver(CAPACITY);
        try (VmmManager m = new VmmManager(host, smallConfig(16 * MIB))) {
            m.beginTagRegion("weights", true);
            List<Block> weights = allocateFilled(m, host, WEIGHTS, 100);
            m.endTagRegion();
            m.beginTagRegion("kv_cache", false);
            List<Block> kv = allocateFilled(m, host, KV, 200);
            m.endTagRegion();
            long untagged = m.allocate(64 * KIB, 0);
            fill(host, untagged, 64 * KIB, 7);

            long heldBefore = host.usage().aliveBytes();
            long tagged = 0;
            for (Block b : weights) tagged += b.size();
            for (Block b : kv) tagged += b.size();
            m.pause(null);
            long heldPaused = host.usage().aliveBytes();
            AllocatorStats paused = m.stats();
            assertTrue(heldBefore - heldPaused >= tagged,
                    "pausing gave back " + (heldBefore - heldPaused) + " bytes, less than the " + tagged + " the tags hold");
            assertEquals(heldBefore - heldPaused, paused.tags().pausedBytes(), "paused_bytes equals what the driver got back");
            assertEquals(host.usage().aliveBytes(), paused.reservedBytes(), "accounting equals the driver");
            assertFullyIntact(host, untagged, 64 * KIB, 7, "untagged memory while the tags are paused");

            // Another phase takes the released memory: more than fits beside the paused tags' pages.
            long otherBytes = CAPACITY - heldPaused - PAGE;
            assertTrue(otherBytes > heldBefore - heldPaused - 2 * PAGE, "the other phase needs the released memory");
            long other = m.allocate(otherBytes, 0);
            fill(host, other, otherBytes, 9);
            assertFullyIntact(host, other, otherBytes, 9, "the other phase's memory");
            m.deallocate(other, 0);
            m.drain();

            m.resume(null);
            for (Block b : weights) assertFullyIntact(host, b.address(), b.size(), b.seed(), "weights after resume, same address");
            for (Block b : kv) fill(host, b.address(), b.size(), b.seed() + 1000); // usable, contents undefined
            for (Block b : kv) assertFullyIntact(host, b.address(), b.size(), b.seed() + 1000, "the cache is usable");
            assertFullyIntact(host, untagged, 64 * KIB, 7, "untagged memory after the resume");

            AllocatorStats after = m.stats();
            assertEquals(0, after.tags().pausedBytes());
            TagStats.Tag w = after.tags().tags().get(0);
            TagStats.Tag c = after.tags().tags().get(1);
            assertEquals("weights", w.name());
            assertEquals(1, w.pauses());
            assertEquals(1, w.resumes());
            assertTrue(w.keepContents() && !c.keepContents());
            long weightBytes = 0;
            for (Block b : weights) weightBytes += b.size();
            assertTrue(w.keptBytes() >= weightBytes, "kept " + w.keptBytes() + " of " + weightBytes);
            assertEquals(0, c.keptBytes(), "a discarded cache copies nothing");
            assertFalse(w.paused());
            m.freeKeptHostMemory();
        } finally {
            host.close();
        }
    }

    @Test
    void whilePausedFreesWorkNewAllocationsAreRefusedAndOtherTagsAreUntouched() {
        HostDriver host = hostDriver(CAPACITY);
        try (VmmManager m = new VmmManager(host, smallConfig(16 * MIB))) {
            m.beginTagRegion("a", true);
            List<Block> a = allocateFilled(m, host, WEIGHTS, 1);
            m.endTagRegion();
            m.beginTagRegion("b", true);
            List<Block> b = allocateFilled(m, host, KV, 50);
            m.endTagRegion();

            m.pause("a");
            m.deallocate(a.get(1).address(), 0); // a free while paused is bookkeeping only
            m.beginTagRegion("a", true);
            TagPausedException refused = assertThrows(TagPausedException.class, () -> m.allocate(4 * KIB, 0));
            assertTrue(refused.getMessage().contains("'a' is paused"), refused.getMessage());
            m.endTagRegion();
            m.beginTagRegion("b", true);
            long more = m.allocate(8 * KIB, 0); // another tag allocates as usual
            fill(host, more, 8 * KIB, 77);
            m.endTagRegion();
            for (Block x : b) assertFullyIntact(host, x.address(), x.size(), x.seed(), "tag b while a is paused");
            assertThrows(IllegalArgumentException.class, () -> m.pause("nobody"));
            assertThrows(IllegalArgumentException.class, () -> m.resume("nobody"));
            assertThrows(IllegalStateException.class, m::endTagRegion);
            assertThrows(TagPausedException.class, () -> m.reallocate(a.get(0).address(), 64 * KIB, 0));

            m.pause("a"); // paused already: nothing to do
            m.resume("a");
            m.resume("a"); // running already
            for (int i = 0; i < a.size(); i++) {
                if (i != 1) assertFullyIntact(host, a.get(i).address(), a.get(i).size(), a.get(i).seed(), "tag a after resume");
            }
            m.beginTagRegion("a", true);
            long again = m.allocate(100 * KIB, 0); // may reuse the block freed while paused
            fill(host, again, 100 * KIB, 5);
            m.endTagRegion();
            assertEquals(1, m.stats().tags().tags().get(0).pauses(), "a second pause of a paused tag is no pause");
            m.freeKeptHostMemory();
        } finally {
            host.close();
        }
    }

    @Test
    void regionsNestAndATagKeepsOneSettingAcrossRegions() {
        HostDriver host = hostDriver(CAPACITY);
        try (VmmManager m = new VmmManager(host, smallConfig(16 * MIB))) {
            m.beginTagRegion("outer", false);
            long o1 = m.allocate(10 * KIB, 0);
            m.beginTagRegion("inner", true);
            long i1 = m.allocate(10 * KIB, 0);
            fill(host, i1, 10 * KIB, 3);
            m.endTagRegion();
            long o2 = m.allocate(10 * KIB, 0);
            m.endTagRegion();
            m.beginTagRegion("outer", true); // the tag now keeps its contents, both regions' allocations
            m.endTagRegion();
            fill(host, o1, 10 * KIB, 1);
            fill(host, o2, 10 * KIB, 2);
            m.pause(null);
            m.resume(null);
            assertFullyIntact(host, o1, 10 * KIB, 1, "outer, first region");
            assertFullyIntact(host, o2, 10 * KIB, 2, "outer, second region");
            assertFullyIntact(host, i1, 10 * KIB, 3, "inner");
            m.freeKeptHostMemory();
        } finally {
            host.close();
        }
    }

    /** Pages a tag freed and still caches go to another tag that needs them, instead of an out-of-memory. */
    @Test
    void aTagsCachedFreePagesServeAnotherTagUnderPressure() {
        HostDriver host = hostDriver(CAPACITY);
        try (VmmManager m = new VmmManager(host, smallConfig(16 * MIB))) {
            m.beginTagRegion("first", false);
            long a = m.allocate(6 * MIB, 0);
            m.endTagRegion();
            m.deallocate(a, 0); // cached, still mapped, in the first tag's region
            m.beginTagRegion("second", true);
            long b = m.allocate(6 * MIB, 0);
            fill(host, b, 6 * MIB, 4);
            m.endTagRegion();
            m.pause("second");
            m.resume("second");
            assertFullyIntact(host, b, 6 * MIB, 4, "the second tag");
            m.freeKeptHostMemory();
        } finally {
            host.close();
        }
    }

    @Test
    void theHostTransfersOfTheEmulationCopyRealBytesAndRefuseBadRanges() {
        HostDriver host = hostDriver(CAPACITY);
        try {
            HostTransfers t = host.transfers();
            long va = host.reserve(PAGE, 0);
            long h = host.create(PAGE);
            host.mapWithAccess(va, PAGE, h);
            fill(host, va, PAGE, 11);
            long pinned = t.allocatePinned(PAGE);
            long s = t.createStream();
            t.copyToHost(pinned, va, PAGE, s);
            fill(host, va, PAGE, 12);
            t.copyToDevice(va, pinned, PAGE, s);
            assertFullyIntact(host, va, PAGE, 11, "round trip through pinned memory");
            assertThrows(dev.vmmkit.driver.DriverException.class, () -> t.copyToHost(pinned, va, 2 * PAGE, s));
            assertThrows(dev.vmmkit.driver.DriverException.class, () -> t.copyToHost(pinned + 8, va, PAGE, s));
            t.destroyStream(s);
            t.freePinned(pinned);
            assertThrows(dev.vmmkit.driver.DriverException.class, () -> t.freePinned(pinned));
            host.unmap(va, PAGE);
            host.release(h);
            host.addressFree(va, PAGE);
        } finally {
            host.close();
        }
    }

    @Test
    void aKeptTagsPauseReleasesEachHandleOnceTheCopiesFromItHaveLandedWhileLaterOnesAreStillAwaited() {
        HostDriver host = hostDriver(CAPACITY);
        TimingDriver timing = new TimingDriver(host);
        try (VmmManager m = new VmmManager(timing, smallConfig(16 * MIB))) {
            m.beginTagRegion("weights", true);
            List<Block> weights = allocateFilled(m, host, new long[]{1 * MIB, 1 * MIB, 1 * MIB}, 300);
            m.endTagRegion();
            assertEquals(3, m.regionOf(weights.get(0).address()).pages.handlesIn(weights.get(0).address(),
                    weights.get(2).address() + MIB), "one handle per block");

            int from = timing.kept();
            timing.arm();
            m.pause("weights");
            timing.disarm();
            List<DriverCall> order = new ArrayList<>();
            for (TimingDriver.Call c : timing.calls(from, timing.kept())) if (!c.otherThread()) order.add(c.call());
            int waitsBeforeFirstRelease = waitsBefore(order, order.indexOf(DriverCall.RELEASE));
            int waitsBeforeLastRelease = waitsBefore(order, order.lastIndexOf(DriverCall.RELEASE));
            assertEquals(3, order.stream().filter(c -> c == DriverCall.RELEASE).count(), order.toString());
            assertTrue(waitsBeforeFirstRelease < waitsBeforeLastRelease,
                    "the first handle goes before the copies from the last one are awaited: " + order);
            m.resume("weights");
            for (Block b : weights) assertFullyIntact(host, b.address(), b.size(), b.seed(), "after the resume");
        }
    }

    private static int waitsBefore(List<DriverCall> order, int index) {
        int waits = 0;
        for (int i = 0; i < index; i++) if (order.get(i) == DriverCall.EVENT_SYNCHRONIZE) waits++;
        return waits;
    }

    @Test
    void pausingEveryTagGivesBackTheDiscardedTagsMemoryBeforeTheKeptTagsBytesAreCopiedOut() {
        HostDriver host = hostDriver(CAPACITY);
        TimingDriver timing = new TimingDriver(host);
        try (VmmManager m = new VmmManager(timing, smallConfig(16 * MIB))) {
            m.beginTagRegion("weights", true); // made first
            List<Block> weights = allocateFilled(m, host, WEIGHTS, 400);
            m.endTagRegion();
            m.beginTagRegion("kv_cache", false);
            allocateFilled(m, host, KV, 500);
            m.endTagRegion();

            int from = timing.kept();
            timing.arm();
            m.pause(null);
            timing.disarm();
            List<DriverCall> order = new ArrayList<>();
            for (TimingDriver.Call c : timing.calls(from, timing.kept())) if (!c.otherThread()) order.add(c.call());
            assertTrue(order.indexOf(DriverCall.RELEASE) < order.indexOf(DriverCall.EVENT_CREATE),
                    "the cache's memory goes before the weights' copies are queued: " + order);
            m.resume(null);
            for (Block b : weights) assertFullyIntact(host, b.address(), b.size(), b.seed(), "after the resume");
        }
    }
}
