package dev.vmmkit.core;

import dev.vmmkit.driver.host.HostDriver;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.stream.LongStream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Shared pieces of the allocator's behaviour tests: a small host device, byte patterns written
 * through the returned addresses, and a reference model of the live allocations.
 *
 * <p>Every byte access first asks the host driver whether the range is mapped with access, so a
 * wrong address fails the test instead of crashing the JVM.
 */
final class AllocatorTestSupport {
    static final long KIB = 1L << 10;
    static final long MIB = 1L << 20;
    /** A small granularity keeps tests fast and light on RAM. */
    static final long PAGE = 64 * KIB;

    private AllocatorTestSupport() {
    }

    static HostDriver hostDriver(long capacity) {
        return HostDriver.builder().granularity(PAGE).capacity(capacity).build();
    }

    /** Defaults with a small address space per region (and so a small page table). */
    static VmmConfig smallConfig(long addressSpace) {
        return VmmConfig.DEFAULTS.withAddressSpaceBytes(addressSpace);
    }

    /** A config whose small-request limit is low, so random sizes of a few pages use both regions. */
    static VmmConfig twoRegionConfig(long addressSpace, long smallLimit) {
        VmmConfig d = VmmConfig.DEFAULTS;
        return new VmmConfig(addressSpace, d.chunkBytes(), smallLimit, d.alignmentBytes(), d.reserveSlack(),
                d.maxCachedBytes(), d.fragRatio());
    }

    /** Sizes from 1 byte to a few pages, biased to small ones as real workloads are. */
    static long randomSize(SplittableRandom rng, long maxBytes) {
        int bucket = rng.nextInt(100);
        long size;
        if (bucket < 45) size = 1 + rng.nextLong(512);
        else if (bucket < 75) size = 1 + rng.nextLong(16 * KIB);
        else if (bucket < 92) size = 1 + rng.nextLong(PAGE + PAGE / 2);
        else size = 1 + rng.nextLong(4 * PAGE);
        return Math.min(size, maxBytes);
    }

    // ------------------------------------------------------------------ byte patterns

    /** The byte at {@code offset} of an allocation filled with the pattern of {@code seed}. */
    static byte patternByte(long seed, long offset) {
        long z = seed * 0x9E3779B97F4A7C15L + offset;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return (byte) (z ^ (z >>> 31));
    }

    private static MemorySegment bytesAt(HostDriver host, long address, long size, String what) {
        if (!host.isAccessible(address, size)) {
            fail(String.format("%s: [0x%x, +%d) is not mapped with access", what, address, size));
        }
        return MemorySegment.ofAddress(address).reinterpret(size);
    }

    /** Writes the whole pattern of {@code seed} into {@code [address, address + size)}. */
    static void fill(HostDriver host, long address, long size, long seed) {
        fill(host, address, size, seed, "fill");
    }

    /** As {@link #fill(HostDriver, long, long, long)}, naming {@code context} if the range is not accessible. */
    static void fill(HostDriver host, long address, long size, long seed, String context) {
        MemorySegment s = bytesAt(host, address, size, context + ": fill of a new allocation");
        for (long i = 0; i < size; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, patternByte(seed, i));
        }
    }

    /** Checks the first and last bytes and a sample in between (cheap enough to run after every op). */
    static void assertSampleIntact(HostDriver host, long address, long size, long seed, String context) {
        MemorySegment s = bytesAt(host, address, size, context);
        long edge = Math.min(size, 16);
        for (long i = 0; i < edge; i++) checkByte(s, address, seed, i, context);
        for (long i = size - edge; i < size; i++) checkByte(s, address, seed, i, context);
        long step = Math.max(1, size / 8);
        for (long i = step / 2; i < size; i += step) checkByte(s, address, seed, i, context);
    }

    /** Checks every byte. */
    static void assertFullyIntact(HostDriver host, long address, long size, long seed, String context) {
        MemorySegment s = bytesAt(host, address, size, context);
        for (long i = 0; i < size; i++) checkByte(s, address, seed, i, context);
    }

    private static void checkByte(MemorySegment s, long address, long seed, long i, String context) {
        byte got = s.get(ValueLayout.JAVA_BYTE, i);
        byte want = patternByte(seed, i);
        if (got != want) {
            fail(String.format("%s: allocation 0x%x (size %d) lost its pattern at offset %d: 0x%02x, expected 0x%02x",
                    context, address, s.byteSize(), i, got, want));
        }
    }

    /** A fail message prefix that lets a failing seeded run be repeated. */
    static String seedNote(long seed) {
        return "seed=" + seed + " (rerun with this seed to repeat)";
    }

    /** The system property that widens the model tests' seeds: {@code FROM-TO}, both included. */
    static final String SEEDS_PROPERTY = "vmmkit.test.seeds";

    /**
     * The seeds a model test runs: {@code chosen} by default; with {@value #SEEDS_PROPERTY} set
     * ({@code scripts/soak-model-tests.sh}), every seed of its range instead, to look for what the
     * chosen ones miss.
     */
    static LongStream seeds(long... chosen) {
        if (runsChosenSeeds()) return LongStream.of(chosen);
        String range = System.getProperty(SEEDS_PROPERTY);
        String[] ends = range.split("-");
        if (ends.length != 2) throw new IllegalArgumentException(SEEDS_PROPERTY + " must be FROM-TO, not '" + range + "'");
        return LongStream.rangeClosed(Long.parseLong(ends[0].trim()), Long.parseLong(ends[1].trim()));
    }

    /** True when the seeds are the chosen ones, so a test may check what those are known to reach. */
    static boolean runsChosenSeeds() {
        String range = System.getProperty(SEEDS_PROPERTY);
        return range == null || range.isBlank();
    }

    // ------------------------------------------------------------------ reference model

    /** The reference model: live address to requested size and pattern seed. */
    static final class LiveModel {
        final TreeMap<Long, Live> live = new TreeMap<>();
        long liveBytes;
        long allocations;
        long frees;

        record Live(long address, long size, long seed, long stream) {
        }

        /** Records a new allocation after checking it is aligned and overlaps no live one. */
        void allocated(long address, long size, long seed, long stream, long alignment, String context) {
            assertTrue(address != 0, context + ": allocate returned 0 for size " + size);
            assertEquals(0, address & (alignment - 1),
                    () -> String.format("%s: 0x%x is not aligned to %d", context, address, alignment));
            Map.Entry<Long, Live> below = live.floorEntry(address);
            if (below != null && below.getValue().address + below.getValue().size > address) {
                fail(String.format("%s: new [0x%x, +%d) overlaps live [0x%x, +%d)", context, address, size,
                        below.getKey(), below.getValue().size));
            }
            Map.Entry<Long, Live> above = live.higherEntry(address);
            if (above != null && above.getKey() < address + size) {
                fail(String.format("%s: new [0x%x, +%d) overlaps live [0x%x, +%d)", context, address, size,
                        above.getKey(), above.getValue().size));
            }
            live.put(address, new Live(address, size, seed, stream));
            liveBytes += size;
            allocations++;
        }

        Live freed(long address) {
            Live l = live.remove(address);
            liveBytes -= l.size;
            frees++;
            return l;
        }

        /** A live allocation chosen at random, or null. */
        /**
         * A live allocation, each equally likely. Not by address: the OS places the regions, so an
         * address-based pick would favour different allocations from one JVM to the next (after a
         * gap, the one below it), and a seed would not repeat.
         */
        Live pick(SplittableRandom rng) {
            if (live.isEmpty()) return null;
            int skip = rng.nextInt(live.size());
            for (Live l : live.values()) {
                if (skip-- == 0) return l;
            }
            throw new AssertionError("unreachable");
        }

        void assertStatsMatch(VmmManager m, String context) {
            AllocatorStats s = m.stats();
            assertEquals(liveBytes, s.liveBytes(), context + ": live bytes");
            assertEquals(allocations, s.allocations(), context + ": allocations");
            assertEquals(frees, s.frees(), context + ": frees");
        }

        void assertAllIntact(HostDriver host, String context) {
            for (Live l : live.values()) assertSampleIntact(host, l.address, l.size, l.seed, context);
        }
    }
}
