package dev.vmmkit.interpose;

import dev.vmmkit.core.TagStats;
import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.DryDriver;
import dev.vmmkit.trace.AllocationRecorder;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A region opened by vmmkit_region_begin tags the thread's allocations on every device, not only
 * on the device current when it opened (seen on two H200s: a tagged tensor on the other device was
 * not paused), with each device's regions nested as the thread's are.
 */
class TagRegionsAcrossDevicesTest {
    private static final long MIB = 1L << 20;
    private final Arena arena = Arena.ofConfined();
    private VmmManager device0;
    private VmmManager device1;

    @BeforeEach
    void install() {
        device0 = new VmmManager(new DryDriver(2 * MIB, 1L << 30), VmmConfig.DEFAULTS);
        device1 = new VmmManager(new DryDriver(2 * MIB, 1L << 30), VmmConfig.DEFAULTS);
        InterposedCalls.install(new InterposeSession(false, device -> device == 0 ? device0 : device == 1 ? device1 : null,
                AllocationRecorder.NONE, null));
    }

    @AfterEach
    void uninstall() {
        InterposedCalls.install(null);
        device0.close();
        device1.close();
        arena.close();
    }

    private long name(String tag) {
        return arena.allocateFrom(tag).address();
    }

    private static long paused(VmmManager manager, String tag) {
        for (TagStats.Tag t : manager.stats().tags().tags()) if (t.name().equals(tag)) return t.pausedBytes();
        return 0;
    }

    @Test
    void aRegionOpenedOnOneDeviceTagsTheThreadsAllocationsOnAnother() {
        long kv = name("kv");
        assertEquals(0, TagCalls.regionBegin(kv, 2, 0, 0));       // device 0 current
        long onOne = InterposedCalls.allocate(8 * MIB, 1, 0);
        long onZero = InterposedCalls.allocate(4 * MIB, 0, 0);
        assertEquals(0, TagCalls.regionEnd(0));
        long untagged = InterposedCalls.allocate(6 * MIB, 1, 0);   // after the region: not the tag's
        assertTrue(onOne > 0 && onZero > 0 && untagged > 0);

        assertEquals(0, TagCalls.pause(kv, 2, 0, TagCalls.KEEP_AS_SET));
        assertEquals(8 * MIB, paused(device1, "kv"));
        assertEquals(4 * MIB, paused(device0, "kv"));
        assertEquals(8 * MIB, device1.stats().tags().pausedBytes(), "the untagged block stays");
        assertEquals(0, TagCalls.resume(kv, 2, 0));
        assertEquals(0, device1.stats().tags().pausedBytes());
        assertEquals(-InterposedCalls.CUDA_ERROR_INVALID_VALUE, TagCalls.regionEnd(0), "no region is open any more");
    }

    @Test
    void theDefaultTagReachesEveryDeviceThoseUsedLaterTooAndAnUntaggedRegionLeavesItOut() {
        long tag = name("default");
        long before = InterposedCalls.allocate(2 * MIB, 0, 0); // device 0's allocator made, untagged
        assertEquals(0, TagCalls.defaultTag(tag, 7, 0));
        long onZero = InterposedCalls.allocate(4 * MIB, 0, 0);
        long onOne = InterposedCalls.allocate(8 * MIB, 1, 0);   // device 1's allocator made now
        assertEquals(0, TagCalls.regionBegin(0, 0, 0, 0));        // a region of no tag, opened on device 0
        long untaggedOnOne = InterposedCalls.allocate(6 * MIB, 1, 0);
        assertEquals(0, TagCalls.regionEnd(0));
        assertTrue(before > 0 && onZero > 0 && onOne > 0 && untaggedOnOne > 0);

        assertEquals(0, TagCalls.pause(tag, 7, 0, TagCalls.KEEP_AS_SET));
        assertEquals(4 * MIB, paused(device0, "default"), "device 0: the block made before the default stays");
        assertEquals(8 * MIB, paused(device1, "default"), "device 1: the untagged region's block stays");
        assertEquals(-InterposedCalls.CUDA_ERROR_MEMORY_ALLOCATION, (int) InterposedCalls.allocate(4 * MIB, 1, 0),
                "outside every region, an allocation into the paused default tag is refused");
        assertEquals(0, TagCalls.resume(tag, 7, 0));

        assertEquals(0, TagCalls.defaultTag(0, 0, 0));
        assertTrue(InterposedCalls.allocate(2 * MIB, 1, 0) > 0);
        assertEquals(8 * MIB, tagOf(device1, "default").liveBytes(), "with no default tag an allocation carries none");
    }

    private static TagStats.Tag tagOf(VmmManager manager, String tag) {
        for (TagStats.Tag t : manager.stats().tags().tags()) if (t.name().equals(tag)) return t;
        return null;
    }

    @Test
    void aPauseThatSetsKeepingSetsItOnEveryDeviceTheTagReached() {
        long weights = name("weights");
        assertEquals(0, TagCalls.regionBegin(weights, 7, 1, 0));  // kept, device 0 current
        InterposedCalls.allocate(8 * MIB, 1, 0);
        InterposedCalls.allocate(4 * MIB, 0, 0);
        assertEquals(0, TagCalls.regionEnd(0));
        assertTrue(tagOf(device0, "weights").keepContents() && tagOf(device1, "weights").keepContents());

        assertEquals(0, TagCalls.pause(weights, 7, 0, 0));         // discarded this time, on both devices
        for (VmmManager device : new VmmManager[] {device0, device1}) {
            TagStats.Tag t = tagOf(device, "weights");
            assertTrue(t.paused() && !t.keepContents() && t.keptBytes() == 0, t.toString());
        }
        assertEquals(0, TagCalls.resume(weights, 7, 0));
        long unknown = name("nothing");
        assertEquals(-InterposedCalls.CUDA_ERROR_INVALID_VALUE, TagCalls.pause(unknown, 7, 0, 0));
        assertTrue(!device0.knowsTag("nothing") && !device1.knowsTag("nothing"), "a refused setting made a tag");
        assertEquals(-InterposedCalls.CUDA_ERROR_INVALID_VALUE, TagCalls.pause(0, 0, 0, 1), "every tag has no one setting");
        assertTrue(!tagOf(device0, "weights").paused(), "the refused call paused nothing");
    }

    @Test
    void nestedRegionsNestOnEachDeviceAsOnTheThread() {
        long outer = name("outer"), inner = name("inner");
        assertEquals(0, TagCalls.regionBegin(outer, 5, 0, 1));    // device 1 current
        assertEquals(0, TagCalls.regionBegin(inner, 5, 0, 0));    // then device 0
        InterposedCalls.allocate(2 * MIB, 1, 0);                   // the innermost region's, on device 1 too
        assertEquals(0, TagCalls.regionEnd(0));
        InterposedCalls.allocate(6 * MIB, 1, 0);                   // the outer one's again
        InterposedCalls.allocate(10 * MIB, 0, 0);                  // device 0 gets the outer region now
        assertEquals(0, TagCalls.regionEnd(1));

        assertEquals(0, TagCalls.pause(inner, 5, 0, TagCalls.KEEP_AS_SET));
        assertEquals(2 * MIB, paused(device1, "inner"));
        assertEquals(0, TagCalls.pause(outer, 5, 0, TagCalls.KEEP_AS_SET));
        assertEquals(6 * MIB, paused(device1, "outer"));
        assertEquals(10 * MIB, paused(device0, "outer"));
        assertEquals(0, TagCalls.resume(0, 0, 0));                 // every tag
    }

    @Test
    void eachThreadHasItsOwnRegions() throws InterruptedException {
        long kv = name("kv");
        assertEquals(0, TagCalls.regionBegin(kv, 2, 0, 0));
        AtomicLong other = new AtomicLong();
        CountDownLatch done = new CountDownLatch(1);
        Thread.ofPlatform().start(() -> {
            other.set(InterposedCalls.allocate(8 * MIB, 1, 0));  // another thread, in no region
            done.countDown();
        });
        done.await();
        InterposedCalls.allocate(2 * MIB, 1, 0);
        assertEquals(0, TagCalls.regionEnd(0));
        assertTrue(other.get() > 0);
        assertEquals(0, TagCalls.pause(kv, 2, 0, TagCalls.KEEP_AS_SET));
        assertEquals(2 * MIB, paused(device1, "kv"));
    }
}
