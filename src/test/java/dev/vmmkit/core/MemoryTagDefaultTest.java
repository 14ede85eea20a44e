package dev.vmmkit.core;

import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import static dev.vmmkit.core.AllocatorTestSupport.KIB;
import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.assertFullyIntact;
import static dev.vmmkit.core.AllocatorTestSupport.fill;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static dev.vmmkit.core.AllocatorTestSupport.smallConfig;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The default memory tag (what allocations outside every region carry, on every thread) and
 * regions of no tag, on the host emulation: a trainer pauses all it holds at once, gradients made
 * on threads it does not control included, and keeps what an untagged region made.
 */
class MemoryTagDefaultTest {
    private static final long CAPACITY = 16 * MIB;

    @Test
    void allocationsOfEveryThreadOutsideRegionsCarryTheDefaultTagAndArePausedWithIt() throws Exception {
        HostDriver host = hostDriver(CAPACITY);
        try (VmmManager m = new VmmManager(host, smallConfig(64 * MIB))) {
            long before = m.allocate(64 * KIB, 0); // made before the default was set: stays untagged
            fill(host, before, 64 * KIB, 1);
            m.setDefaultTag("default", true);
            long weights = m.allocate(3 * MIB + 17, 0);
            fill(host, weights, 3 * MIB + 17, 2);
            // Another thread's allocation, as autograd makes gradients on a device thread of its own.
            long[] gradient = new long[1];
            Thread worker = new Thread(() -> {
                gradient[0] = m.allocate(2 * MIB, 0);
                fill(host, gradient[0], 2 * MIB, 3);
            });
            worker.start();
            worker.join();
            m.beginUntaggedRegion();
            long kept = m.allocate(128 * KIB, 0);
            fill(host, kept, 128 * KIB, 4);
            m.endTagRegion();

            assertEquals(3 * MIB + 17 + 2 * MIB, tag(m, "default").liveBytes(),
                    "the default tag holds this thread's and the other thread's allocations, nothing else");
            long held = host.usage().aliveBytes();
            m.pause("default");
            assertTrue(held - host.usage().aliveBytes() >= 5 * MIB, "the pause gave back the default tag's pages");
            assertFullyIntact(host, before, 64 * KIB, 1, "made before the default was set");
            assertFullyIntact(host, kept, 128 * KIB, 4, "made in an untagged region");
            m.resume("default");
            assertFullyIntact(host, weights, 3 * MIB + 17, 2, "kept contents, same address");
            assertFullyIntact(host, gradient[0], 2 * MIB, 3, "the other thread's allocation, kept");
            m.freeKeptHostMemory();
        } finally {
            host.close();
        }
    }

    @Test
    void whileTheDefaultTagIsPausedOnlyRegionsAllocateAndClearingItLeavesItsMemoryTagged() {
        HostDriver host = hostDriver(CAPACITY);
        try (VmmManager m = new VmmManager(host, smallConfig(64 * MIB))) {
            m.setDefaultTag("default", false);
            long a = m.allocate(1 * MIB, 0);
            m.pause("default");
            TagPausedException refused = assertThrows(TagPausedException.class, () -> m.allocate(4 * KIB, 0));
            assertTrue(refused.getMessage().contains("default"), refused.getMessage());
            m.beginUntaggedRegion();
            long untagged = m.allocate(4 * KIB, 0);
            m.beginTagRegion("other", false);
            long other = m.allocate(8 * KIB, 0);
            m.endTagRegion();
            m.endTagRegion();
            m.deallocate(a, 0); // frees of a paused tag's blocks work
            m.resume("default");
            long again = m.allocate(4 * KIB, 0);
            assertEquals(4 * KIB, tag(m, "default").liveBytes(), "after the resume the default tag takes allocations again");
            assertEquals(8 * KIB, tag(m, "other").liveBytes());

            m.setDefaultTag(null, false);
            long plain = m.allocate(16 * KIB, 0);
            assertEquals(4 * KIB, tag(m, "default").liveBytes(), "with no default tag an allocation carries none");
            m.pause("default"); // still a tag like any other, by its name
            assertTrue(tag(m, "default").paused());
            m.resume(null);
            for (long p : new long[]{untagged, other, again, plain}) m.deallocate(p, 0);
        } finally {
            host.close();
        }
    }

    @Test
    void aBadNameChangesNothingAndTheSettingIsTheTagsAsARegionWouldSetIt() {
        HostDriver host = hostDriver(CAPACITY);
        try (VmmManager m = new VmmManager(host, smallConfig(64 * MIB))) {
            m.setDefaultTag("weights", false);
            assertThrows(IllegalArgumentException.class, () -> m.setDefaultTag("", true));
            assertThrows(IllegalArgumentException.class, () -> m.setDefaultTag("x".repeat(MemoryTagControl.MAX_TAG_NAME_LENGTH + 1), true));
            long a = m.allocate(4 * KIB, 0);
            assertEquals(4 * KIB, tag(m, "weights").liveBytes(), "the earlier default still holds");
            assertFalse(tag(m, "weights").keepContents());
            m.beginTagRegion("weights", true); // a region of the default tag sets its setting, as for any tag
            m.endTagRegion();
            assertTrue(tag(m, "weights").keepContents());
            m.setDefaultTag("weights", false);
            assertFalse(tag(m, "weights").keepContents());
            assertThrows(IllegalStateException.class, m::endTagRegion, "no region open: the default tag is none");
            m.deallocate(a, 0);
        } finally {
            host.close();
        }
    }

    /**
     * Threads allocate and free at random inside tag regions, untagged regions and outside both,
     * while the default tag changes between phases; each allocation's tag is predicted by a model
     * of the rules (innermost region, else the default), and every tag's live bytes must equal it.
     */
    @Test
    void everyTagHoldsWhatTheRulesPredictWithThreadsAndAChangingDefault() throws Exception {
        int threads = 4;
        String[] defaults = {"default", null, "second", "default"};
        HostDriver host = hostDriver(64 * MIB);
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try (VmmManager m = new VmmManager(host, smallConfig(256 * MIB))) {
            Map<String, Long> expected = new HashMap<>();
            for (int phase = 0; phase < defaults.length; phase++) {
                m.setDefaultTag(defaults[phase], false);
                CyclicBarrier start = new CyclicBarrier(threads);
                List<Future<Map<String, Long>>> results = new ArrayList<>();
                for (int t = 0; t < threads; t++) {
                    long seed = 1000L * phase + t;
                    String defaultNow = defaults[phase];
                    results.add(pool.submit(() -> {
                        start.await();
                        return randomRegions(m, new SplittableRandom(seed), defaultNow);
                    }));
                }
                for (Future<Map<String, Long>> r : results) r.get().forEach((k, v) -> expected.merge(k, v, Long::sum));
            }
            for (String name : List.of("default", "second", "a", "b")) {
                assertEquals(expected.getOrDefault(name, 0L), tag(m, name).liveBytes(), "tag " + name);
            }
        } finally {
            pool.shutdownNow();
            host.close();
        }
    }

    /** A thread's random program; returns the bytes it leaves live per tag, as the rules say. */
    private static Map<String, Long> randomRegions(VmmManager m, SplittableRandom rng, String defaultTag) {
        Map<String, Long> live = new HashMap<>();
        List<long[]> mine = new ArrayList<>(); // address, size, index into tagOf
        List<String> tagOf = new ArrayList<>();
        List<String> stack = new ArrayList<>(); // innermost last; "" is an untagged region
        for (int op = 0; op < 300; op++) {
            int kind = rng.nextInt(10);
            if (kind == 0 && stack.size() < 4) {
                String t = rng.nextInt(3) == 0 ? "" : rng.nextBoolean() ? "a" : "b";
                if (t.isEmpty()) m.beginUntaggedRegion();
                else m.beginTagRegion(t, false);
                stack.add(t);
            } else if (kind == 1 && !stack.isEmpty()) {
                m.endTagRegion();
                stack.removeLast();
            } else if (kind < 5 && !mine.isEmpty()) {
                long[] victim = mine.remove(rng.nextInt(mine.size()));
                m.deallocate(victim[0], 0);
                String t = tagOf.get((int) victim[2]);
                if (t != null) live.merge(t, -victim[1], Long::sum);
            } else {
                long size = 1 + rng.nextLong(96 * KIB);
                String innermost = stack.isEmpty() ? defaultTag : stack.getLast();
                String t = innermost == null || innermost.isEmpty() ? null : innermost;
                mine.add(new long[]{m.allocate(size, 0), size, tagOf.size()});
                tagOf.add(t);
                if (t != null) live.merge(t, size, Long::sum);
            }
        }
        while (!stack.isEmpty()) {
            m.endTagRegion();
            stack.removeLast();
        }
        return live;
    }

    private static TagStats.Tag tag(VmmManager m, String name) {
        for (TagStats.Tag t : m.stats().tags().tags()) if (t.name().equals(name)) return t;
        throw new AssertionError("no tag " + name + " in the stats");
    }
}
