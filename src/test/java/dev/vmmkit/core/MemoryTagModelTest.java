package dev.vmmkit.core;

import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;

import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.PAGE;
import static dev.vmmkit.core.AllocatorTestSupport.assertSampleIntact;
import static dev.vmmkit.core.AllocatorTestSupport.fill;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static dev.vmmkit.core.AllocatorTestSupport.randomSize;
import static dev.vmmkit.core.AllocatorTestSupport.seedNote;
import static dev.vmmkit.core.AllocatorTestSupport.seeds;
import static dev.vmmkit.core.AllocatorTestSupport.smallConfig;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Random sequences of allocations, frees, pauses and resumes over three tags and untagged memory,
 * against a reference model of which tags are paused: allocations into paused tags are refused,
 * paused memory is unmapped, kept contents come back, discarded ones are usable, nothing else moves.
 * Also with one page per handle, so that blocks span the handles a kept tag's pause releases one by one.
 */
class MemoryTagModelTest {
    private static final String[] TAGS = {"weights", "adapters", "kv_cache"};
    private static final boolean[] KEEP = {true, true, false};
    private static final long[] TWELVE = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};

    record Live(long address, long size, long seed, int tag) {
    }

    @Test
    void randomSequencesAgreeWithTheModel() {
        seeds(TWELVE).forEach(seed -> run(seed, 0));
    }

    @Test
    void randomSequencesAgreeWithTheModelWithOnePagePerHandle() {
        seeds(TWELVE).forEach(seed -> run(seed, PAGE));
    }

    private static void run(long seed, long handleCap) {
        String note = seedNote(seed) + (handleCap != 0 ? ", one page per handle" : "");
        SplittableRandom rng = new SplittableRandom(seed);
        HostDriver host = hostDriver(48 * MIB);
        try {
            runOn(host, handleCap, note, rng);
            assertTrue(host.usage().isEmpty(), note + ": after close the driver still holds " + host.usage());
        } finally {
            host.close();
        }
    }

    private static void runOn(HostDriver host, long handleCap, String note, SplittableRandom rng) {
        try (VmmManager m = new VmmManager(host, smallConfig(32 * MIB).withHandleCapBytes(handleCap))) {
            Map<Long, Live> live = new HashMap<>();
            Set<Integer> paused = new HashSet<>();
            for (int op = 0; op < 400; op++) {
                String ctx = note + ", op " + op;
                int dice = rng.nextInt(100);
                int tag = rng.nextInt(TAGS.length + 1) - 1; // -1: untagged
                if (dice < 45) {
                    long size = randomSize(rng, 2 * MIB);
                    if (tag >= 0) m.beginTagRegion(TAGS[tag], KEEP[tag]);
                    try {
                        if (tag >= 0 && paused.contains(tag)) {
                            assertThrows(TagPausedException.class, () -> m.allocate(size, 0), ctx);
                            continue;
                        }
                        long a = m.allocate(size, 0);
                        long s = rng.nextLong();
                        fill(host, a, size, s, ctx);
                        live.put(a, new Live(a, size, s, tag));
                    } finally {
                        if (tag >= 0) m.endTagRegion();
                    }
                } else if (dice < 75) {
                    if (live.isEmpty()) continue;
                    List<Live> all = new ArrayList<>(live.values());
                    all.sort((x, y) -> Long.compare(x.seed(), y.seed()));
                    Live victim = all.get(rng.nextInt(all.size()));
                    m.deallocate(victim.address(), 0); // works while its tag is paused
                    live.remove(victim.address());
                } else if (dice < 88) {
                    String name = tag < 0 ? null : TAGS[tag];
                    if (name != null && !m.knowsTag(name)) {
                        assertThrows(IllegalArgumentException.class, () -> m.pause(name), ctx);
                        continue;
                    }
                    m.pause(name);
                    if (tag < 0) {
                        for (int t = 0; t < TAGS.length; t++) if (m.knowsTag(TAGS[t])) paused.add(t);
                    } else {
                        paused.add(tag);
                    }
                } else {
                    String name = tag < 0 ? null : TAGS[tag];
                    if (name != null && !m.knowsTag(name)) continue;
                    m.resume(name);
                    Set<Integer> resumed = new HashSet<>();
                    if (tag < 0) resumed.addAll(paused);
                    else if (paused.contains(tag)) resumed.add(tag);
                    paused.removeAll(resumed);
                    for (Live l : new ArrayList<>(live.values())) {
                        if (!resumed.contains(l.tag())) continue;
                        if (KEEP[l.tag()]) {
                            assertSampleIntact(host, l.address(), l.size(), l.seed(), ctx + ", kept contents after resume");
                        } else {
                            long s = rng.nextLong(); // discarded: usable, contents undefined
                            fill(host, l.address(), l.size(), s, ctx);
                            live.put(l.address(), new Live(l.address(), l.size(), s, l.tag()));
                        }
                    }
                }
                for (Live l : live.values()) {
                    if (l.tag() >= 0 && paused.contains(l.tag())) {
                        assertFalse(host.isAccessible(l.address(), l.size()), ctx + ": a paused tag's memory is unmapped");
                    } else {
                        assertSampleIntact(host, l.address(), l.size(), l.seed(), ctx + ", memory not paused");
                    }
                }
                AllocatorStats s = m.stats();
                assertEquals(host.usage().aliveBytes(), s.reservedBytes(), ctx + ": figures equal the driver's");
                for (TagStats.Tag t : s.tags().tags()) {
                    int index = List.of(TAGS).indexOf(t.name());
                    if (paused.contains(index) != t.paused()) fail(ctx + ": tag " + t.name() + " paused=" + t.paused());
                }
            }
            m.resume(null);
            for (Live l : live.values()) m.deallocate(l.address(), 0);
            assertEquals(0, m.stats().liveBytes(), note);
            m.freeKeptHostMemory();
        }
    }
}
