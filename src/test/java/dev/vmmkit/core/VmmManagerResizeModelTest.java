package dev.vmmkit.core;

import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.stream.LongStream;

import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.PAGE;
import static dev.vmmkit.core.AllocatorTestSupport.assertFullyIntact;
import static dev.vmmkit.core.AllocatorTestSupport.assertSampleIntact;
import static dev.vmmkit.core.AllocatorTestSupport.fill;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static dev.vmmkit.core.AllocatorTestSupport.seedNote;
import static dev.vmmkit.core.AllocatorTestSupport.smallConfig;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Random sequences of allocate, free, reallocate and the seed's resize pattern (allocate bigger,
 * remapCopy the whole old buffer, free the old one, sometimes much later) against a reference
 * model of every live buffer's bytes, on the host emulation with real bytes.
 */
class VmmManagerResizeModelTest {
    private static final long[] STREAMS = {0, 1, VmmManager.DEVICE_WIDE_STREAM};

    /** A live buffer: its size, the pattern seed of its bytes, the stream it was allocated on. */
    private record Buffer(long size, long seed, long stream) {
    }

    static LongStream chosenSeeds() {
        return AllocatorTestSupport.seeds(1, 2, 3, 4, 5, 6);
    }

    @ParameterizedTest
    @MethodSource("chosenSeeds")
    void everyBufferKeepsItsBytesThroughResizesAndRemaps(long seed) {
        String note = seedNote(seed);
        SplittableRandom rng = new SplittableRandom(seed);
        try (HostDriver host = hostDriver(128 * MIB)) {
            VmmManager m = VmmManager.withFenceOnCallingThread(host, smallConfig(256 * MIB));
            if (seed % 2 == 0) m.useWholePagesFrom(0); // as VMM_ZERO_COPY=1 sets it up, on half the seeds
            TreeMap<Long, Buffer> live = new TreeMap<>();
            Set<Long> aliases = new HashSet<>(); // remapped sources: their bytes follow the destination
            long liveBytes = 0;
            for (int op = 0; op < 400; op++) {
                String ctx = note + ", op " + op;
                int dice = rng.nextInt(100);
                if (dice < 30 || live.size() < 2) {
                    long size = size(rng);
                    long stream = STREAMS[rng.nextInt(STREAMS.length)];
                    long address = m.allocate(size, stream);
                    long patternSeed = rng.nextLong();
                    fill(host, address, size, patternSeed, ctx);
                    live.put(address, new Buffer(size, patternSeed, stream));
                    liveBytes += size;
                } else if (dice < 50 || liveBytes > 24 * MIB) {
                    long address = pick(live, rng);
                    Buffer b = live.remove(address);
                    if (!aliases.remove(address)) assertFullyIntact(host, address, b.size, b.seed, ctx + " (at free)");
                    m.deallocate(address, b.stream);
                    liveBytes -= b.size;
                } else if (dice < 75) {
                    long address = pick(live, rng);
                    if (aliases.contains(address)) continue;
                    Buffer b = live.remove(address);
                    long newSize = rng.nextBoolean() ? b.size + 1 + rng.nextLong(2 * b.size) : 1 + rng.nextLong(b.size);
                    long moved = m.reallocate(address, newSize, b.stream);
                    assertFullyIntact(host, moved, Math.min(b.size, newSize), b.seed, ctx + " (after reallocate)");
                    long patternSeed = rng.nextLong();
                    fill(host, moved, newSize, patternSeed, ctx);
                    live.put(moved, new Buffer(newSize, patternSeed, b.stream));
                    liveBytes += newSize - b.size;
                } else {
                    // The seed's pattern, on the stream of the old buffer.
                    long src = pick(live, rng);
                    if (aliases.contains(src)) continue;
                    Buffer old = live.get(src);
                    long bigger = old.size + rng.nextLong(old.size + 1);
                    long dst = m.allocate(bigger, old.stream);
                    long dstSeed = rng.nextLong();
                    fill(host, dst, bigger, dstSeed, ctx);
                    live.put(dst, new Buffer(bigger, dstSeed, old.stream));
                    liveBytes += bigger;
                    if (m.remapCopy(dst, src, old.size, old.stream == VmmManager.DEVICE_WIDE_STREAM ? 0 : old.stream)) {
                        assertFullyIntact(host, dst, old.size, old.seed, ctx + " (after the remap)");
                        assertFullyIntact(host, src, old.size, old.seed, ctx + " (the source aliases it)");
                        // The destination's bytes past the copy are its own; its first bytes now the source's.
                        long newSeed = rng.nextLong();
                        fill(host, dst, bigger, newSeed, ctx);
                        live.put(dst, new Buffer(bigger, newSeed, old.stream));
                        aliases.add(src);
                        if (rng.nextInt(4) > 0) { // usually freed at once, as the pattern does
                            live.remove(src);
                            aliases.remove(src);
                            m.deallocate(src, old.stream);
                            liveBytes -= old.size;
                        }
                    }
                }
                assertEquals(liveBytes, m.stats().liveBytes(), ctx + ": live bytes");
                assertEquals(host.usage().aliveBytes(), m.stats().reservedBytes(), ctx + ": physical bytes equal the driver's");
                if (op % 25 == 0) {
                    for (Map.Entry<Long, Buffer> e : live.entrySet()) {
                        if (!aliases.contains(e.getKey())) assertSampleIntact(host, e.getKey(), e.getValue().size, e.getValue().seed, ctx);
                    }
                }
                if (dice == 99) m.drain();
            }
            // The chosen seeds are known to reach remaps (a check of this test's reach, not of vmmkit):
            // a seed drawn at random may make none.
            if (seed % 2 == 0 && AllocatorTestSupport.runsChosenSeeds()) {
                assertTrue(m.stats().zeroCopy().remaps() > 0, note + ": some copies became remaps");
            }
            for (Map.Entry<Long, Buffer> e : live.entrySet()) {
                if (!aliases.contains(e.getKey())) assertFullyIntact(host, e.getKey(), e.getValue().size, e.getValue().seed, note + ", final");
                m.deallocate(e.getKey(), e.getValue().stream);
            }
            assertEquals(0, m.stats().liveBytes(), note);
            m.drain();
            m.close();
            if (!host.usage().isEmpty()) fail(note + ": after close the driver still holds " + host.usage());
        }
    }

    /** Sizes from bytes to a few dozen pages, a third of them large enough for whole pages. */
    private static long size(SplittableRandom rng) {
        return switch (rng.nextInt(3)) {
            case 0 -> 1 + rng.nextLong(PAGE * 2);
            case 1 -> 1 + rng.nextLong(20 * PAGE);
            default -> 4 * PAGE + rng.nextLong(40 * PAGE);
        };
    }

    private static long pick(TreeMap<Long, Buffer> live, SplittableRandom rng) {
        int skip = rng.nextInt(live.size());
        for (long address : live.keySet()) {
            if (skip-- == 0) return address;
        }
        throw new AssertionError("unreachable");
    }
}
