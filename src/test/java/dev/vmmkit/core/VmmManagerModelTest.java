package dev.vmmkit.core;

import dev.vmmkit.core.AllocatorTestSupport.LiveModel;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.SplittableRandom;
import java.util.stream.LongStream;

import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.assertFullyIntact;
import static dev.vmmkit.core.AllocatorTestSupport.assertSampleIntact;
import static dev.vmmkit.core.AllocatorTestSupport.fill;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static dev.vmmkit.core.AllocatorTestSupport.randomSize;
import static dev.vmmkit.core.AllocatorTestSupport.seedNote;
import static dev.vmmkit.core.AllocatorTestSupport.seeds;
import static dev.vmmkit.core.AllocatorTestSupport.twoRegionConfig;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Seeded random allocate/free sequences checked against a plain model of the live allocations:
 * after every operation the allocations are aligned, disjoint, hold their own bytes, and the
 * allocator's figures equal the model's. Closing gives every driver resource back.
 */
class VmmManagerModelTest {
    private static final long[] STREAMS = {0, 1, 2, 0x7f00_1234_5678L, VmmManager.DEVICE_WIDE_STREAM};
    private static final int OPS = 3000;
    private static final int MAX_LIVE = 250;

    static LongStream plainSeeds() {
        return seeds(1, 2, 3, 0xC0FFEE, 20240601);
    }

    static LongStream laggingSeeds() {
        return seeds(11, 12, 13);
    }

    @ParameterizedTest(name = "seed {0}")
    @MethodSource("plainSeeds")
    void randomSequencesMatchTheModel(long seed) {
        run(seed, false, 48 * MIB, false);
    }

    /** The same with handles of up to eight pages, and with the budget set from a remembered peak. */
    @ParameterizedTest(name = "seed {0}, multi-page handles")
    @ValueSource(longs = {31, 32, 33})
    void randomSequencesMatchTheModelWithMultiPageHandles(long seed) {
        run(seed, seed == 33, 48 * MIB, false, 8 * AllocatorTestSupport.PAGE, seed == 32 ? 4 * MIB : 0);
    }

    /**
     * The same with events held open and completed at random points, as a busy device would, and
     * device-wide frees waiting for the fence's own thread: its synchronisations complete the held
     * events whenever it gets to them, so a run does not repeat exactly, but the checks hold.
     */
    @ParameterizedTest(name = "seed {0}, held events")
    @MethodSource("laggingSeeds")
    void randomSequencesMatchTheModelWhileStreamsLag(long seed) {
        run(seed, true, 48 * MIB, true);
    }

    /**
     * The same on a device barely larger than the live set, so allocations often run out of memory
     * and must drain and retry. A request may still fail, but only with OutOfDeviceMemoryException,
     * and the failure must leave everything as it was. Capacities are chosen per seed so that the
     * live set reaches them and recovery runs.
     */
    @ParameterizedTest(name = "seed {0}, held events {1}, capacity {2} MiB")
    @CsvSource({"21, false, 5", "26, false, 6", "23, true, 5", "24, true, 6"})
    void randomSequencesMatchTheModelOnATightDevice(long seed, boolean holdEvents, long capacityMib) {
        run(seed, holdEvents, capacityMib * MIB, false);
    }

    /**
     * The same with no slack over the peak of live bytes, so the slow paths run at the budget:
     * small requests take the large region's free blocks and the regions take each other's free
     * handles, with events completing late or at once.
     */
    @ParameterizedTest(name = "seed {0}, held events {1}, at the budget")
    @CsvSource({"41, false", "42, true", "43, false"})
    void randomSequencesMatchTheModelAtTheBudget(long seed, boolean holdEvents) {
        run(seed, holdEvents, 48 * MIB, false, 0, 0, 1.0);
    }

    /** With {@code backgroundFence} false, device-wide frees synchronise on this thread, so the run repeats exactly. */
    private static void run(long seed, boolean holdEvents, long capacity, boolean backgroundFence) {
        run(seed, holdEvents, capacity, backgroundFence, 0, 0);
    }

    private static void run(long seed, boolean holdEvents, long capacity, boolean backgroundFence, long handleCap,
                            long peakHint) {
        // On the tight device, a budget above the capacity: the driver's out-of-memory, not the
        // budget (which moves pages between the regions first), must stop growth, so recovery runs.
        run(seed, holdEvents, capacity, backgroundFence, handleCap, peakHint, capacity < 16 * MIB ? 1.25 : VmmConfig.DEFAULTS.reserveSlack());
    }

    private static void run(long seed, boolean holdEvents, long capacity, boolean backgroundFence, long handleCap,
                            long peakHint, double slack) {
        String note = seedNote(seed) + ", handle cap " + handleCap + ", peak hint " + peakHint + ", slack " + slack;
        SplittableRandom rng = new SplittableRandom(seed);
        HostDriver host = hostDriver(capacity);
        try {
            VmmConfig config = twoRegionConfig(64 * MIB, 32 * 1024).withHandleCapBytes(handleCap).withPeakHintBytes(peakHint)
                    .withReserveSlack(slack);
            VmmManager m = backgroundFence ? new VmmManager(host, config) : VmmManager.withFenceOnCallingThread(host, config);
            host.hostEvents().holdCompletion(holdEvents);
            LiveModel model = new LiveModel();
            int outOfMemoryFailures = 0;
            long alignment = config.alignmentBytes();
            for (int op = 0; op < OPS; op++) {
                String ctx = note + ", op " + op;
                int dice = rng.nextInt(100);
                if (dice < 55 && model.live.size() < MAX_LIVE || model.live.isEmpty()) {
                    long size = randomSize(rng, Long.MAX_VALUE);
                    long stream = STREAMS[rng.nextInt(STREAMS.length)];
                    long address;
                    try {
                        address = m.allocate(size, stream);
                    } catch (OutOfDeviceMemoryException e) {
                        assertEquals(size, e.requestedBytes(), ctx + ": " + e.getMessage());
                        assertEquals(model.liveBytes, e.liveBytes(), ctx + ": " + e.getMessage());
                        assertTrue(e.reservedBytes() + size > capacity - AllocatorTestSupport.PAGE * 4,
                                ctx + ": out of memory far from the capacity: " + e.getMessage());
                        outOfMemoryFailures++;
                        model.assertStatsMatch(m, ctx);
                        continue;
                    }
                    long patternSeed = rng.nextLong();
                    model.allocated(address, size, patternSeed, stream, alignment, ctx);
                    assertTrue(m.owns(address), ctx + ": owns(new address)");
                    assertEquals(size, m.sizeOf(address), ctx + ": sizeOf(new address)");
                    fill(host, address, size, patternSeed, ctx);
                } else if (dice < 95) {
                    LiveModel.Live victim = model.pick(rng);
                    assertFullyIntact(host, victim.address(), victim.size(), victim.seed(), ctx + " (at free)");
                    // Mostly the allocating stream, sometimes another one (allowed, see VmmManagerBadInputTest).
                    long stream = rng.nextInt(10) == 0 ? STREAMS[rng.nextInt(STREAMS.length)] : victim.stream();
                    m.deallocate(victim.address(), stream);
                    model.freed(victim.address());
                    assertEquals(-1, m.sizeOf(victim.address()), ctx + ": sizeOf(freed address)");
                } else if (dice < 98) {
                    LiveModel.Live l = model.pick(rng);
                    if (l != null) assertFullyIntact(host, l.address(), l.size(), l.seed(), ctx + " (random check)");
                } else if (holdEvents) {
                    if (rng.nextBoolean()) host.hostEvents().completeAll();
                    else host.hostEvents().completeStream(STREAMS[rng.nextInt(STREAMS.length)]);
                } else {
                    m.drain();
                }

                model.assertStatsMatch(m, ctx);
                LiveModel.Live any = model.pick(rng);
                if (any != null) {
                    assertEquals(any.size(), m.sizeOf(any.address()), ctx + ": sizeOf(live address)");
                    assertSampleIntact(host, any.address(), any.size(), any.seed(), ctx);
                }
                assertEquals(host.usage().aliveBytes(), m.stats().reservedBytes(),
                        ctx + ": the allocator's physical bytes equal what the driver holds");
                if (op % 500 == 499) model.assertAllIntact(host, ctx);
            }
            model.assertAllIntact(host, note + ", end");
            assertTrue(model.live.size() > 0, "the run ends with live allocations, so close must free them too");

            AllocatorStats stats = m.stats();
            assertTrue(stats.cacheHits() > OPS / 4, note + ": most allocations hit the cache: " + stats);
            if (capacity < 16 * MIB) {
                assertTrue(stats.outOfMemoryRecoveries() > 0, note + ": the tight device needed recoveries: " + stats);
                assertTrue(outOfMemoryFailures < OPS / 20, note + ": few requests fail for good: " + outOfMemoryFailures);
            }
            m.close();
            HostDriver.Usage usage = host.usage();
            assertTrue(usage.isEmpty(), note + ": after close the driver holds nothing, got " + usage);
        } finally {
            host.close();
        }
    }
}
