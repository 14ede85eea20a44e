package dev.vmmkit.core;

import dev.vmmkit.core.AllocatorTestSupport.LiveModel;
import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.FaultInjectingDriver;
import dev.vmmkit.driver.FaultPlan;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.stream.Stream;

import static dev.vmmkit.core.AllocatorTestSupport.KIB;
import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.PAGE;
import static dev.vmmkit.core.AllocatorTestSupport.assertFullyIntact;
import static dev.vmmkit.core.AllocatorTestSupport.fill;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static dev.vmmkit.core.AllocatorTestSupport.randomSize;
import static dev.vmmkit.core.AllocatorTestSupport.smallConfig;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Driver failures at every position of a workload: an allocation may fail, but nothing else may
 * break. Live allocations keep their bytes, the allocator's figures stay equal to the driver's,
 * it works again once the faults stop, and closing it leaves the driver holding nothing.
 *
 * <p>Device-wide frees synchronise on the allocating thread here, so that each seed repeats the
 * same calls and a fault lands where the seed says (VmmManagerDeviceWideFreeTest covers the fence).
 */
class VmmManagerFaultTest {
    private static final DriverCall[] KINDS = {
            DriverCall.CREATE, DriverCall.MAP, DriverCall.SET_ACCESS, DriverCall.UNMAP,
            DriverCall.RELEASE, DriverCall.RESERVE, DriverCall.EVENT_RECORD, DriverCall.EVENT_QUERY};
    /** The kinds that fail together in the mixed-fault runs: the allocator's calls, its events and its synchronisations. */
    private static final DriverCall[] MIXED_KINDS = {
            DriverCall.CREATE, DriverCall.MAP, DriverCall.SET_ACCESS, DriverCall.UNMAP, DriverCall.RELEASE,
            DriverCall.RESERVE, DriverCall.EVENT_CREATE, DriverCall.EVENT_RECORD, DriverCall.EVENT_QUERY,
            DriverCall.EVENT_SYNCHRONIZE, DriverCall.DEVICE_SYNCHRONIZE};
    private static final int[] CODES = {CudaResult.OUT_OF_MEMORY, CudaResult.INVALID_VALUE};
    private static final int MAX_N = 40;
    private static final long[] STREAMS = {0, 1, 2, VmmManager.DEVICE_WIDE_STREAM};

    static Stream<Arguments> kindsAndCodes() {
        List<Arguments> all = new ArrayList<>();
        for (DriverCall kind : KINDS) {
            for (int code : CODES) all.add(Arguments.of(kind, code));
        }
        return all.stream();
    }

    /** One fault at the Nth call of a kind, for N = 1..40, each on a fresh allocator. */
    @ParameterizedTest(name = "{0} fails with {1}")
    @MethodSource("kindsAndCodes")
    void anyFailingDriverCallLeavesTheAllocatorConsistent(DriverCall kind, int code) {
        int injectedSomewhere = 0;
        for (int n = 1; n <= MAX_N; n++) {
            long seed = kind.ordinal() * 1000L + code * 100L + n;
            injectedSomewhere += runWithOneFault(kind, n, code, seed) ? 1 : 0;
        }
        // The workload makes about 30-80 calls of most kinds, fewer unmaps (one unmap covers a
        // whole free range), releases (only when the pool overflows) and reservations (one per
        // region): check the faults really happened.
        int expected = switch (kind) {
            case RESERVE -> 4;
            case UNMAP, RELEASE -> 8;
            // One per mapped run; regions that take each other's free handles map fewer runs.
            case SET_ACCESS -> 15;
            default -> MAX_N / 2;
        };
        assertTrue(injectedSomewhere >= expected,
                kind + ": the workload reached only " + injectedSomewhere + " of the fault positions");
    }

    /**
     * The same with both size classes in use (requests over 16 KiB go to the large region): at the
     * budget, small requests take the large region's free blocks, and each region reclaims the
     * other's free handles after promoting its completed frees (event record and query).
     */
    @ParameterizedTest(name = "{0} fails, both size classes")
    @org.junit.jupiter.params.provider.EnumSource(value = DriverCall.class,
            names = {"CREATE", "MAP", "SET_ACCESS", "UNMAP", "EVENT_RECORD", "EVENT_QUERY"})
    void anyFailingDriverCallWithBothSizeClassesLeavesTheAllocatorConsistent(DriverCall kind) {
        int injectedSomewhere = 0;
        for (int n = 1; n <= MAX_N / 2; n++) {
            long seed = 90_000 + kind.ordinal() * 1000L + n;
            injectedSomewhere += runWithOneFault(kind, n, CudaResult.OUT_OF_MEMORY, seed, 0, 16 * KIB) ? 1 : 0;
        }
        assertTrue(injectedSomewhere >= (kind == DriverCall.UNMAP ? 3 : 5),
                kind + ": the workload reached only " + injectedSomewhere + " of the fault positions");
    }

    /**
     * The same with handles of up to four pages: runs are backed by few large handles, and only
     * whole handles are reclaimed, moved or rolled back.
     */
    @ParameterizedTest(name = "{0} fails with {1}, handles of up to 4 pages")
    @MethodSource("kindsAndCodes")
    void anyFailingDriverCallWithMultiPageHandlesLeavesTheAllocatorConsistent(DriverCall kind, int code) {
        int injectedSomewhere = 0;
        for (int n = 1; n <= MAX_N / 2; n++) {
            long seed = 50_000 + kind.ordinal() * 1000L + code * 100L + n;
            injectedSomewhere += runWithOneFault(kind, n, code, seed, 4 * PAGE) ? 1 : 0;
        }
        // Fewer, larger handles: fewer calls of each kind than with one handle per page.
        int expected = switch (kind) {
            case RESERVE -> 2;
            case UNMAP, RELEASE, CREATE -> 3;
            default -> 5;
        };
        assertTrue(injectedSomewhere >= expected,
                kind + ": the workload reached only " + injectedSomewhere + " of the fault positions");
    }

    private static boolean runWithOneFault(DriverCall kind, int n, int code, long seed) {
        return runWithOneFault(kind, n, code, seed, 0);
    }

    private static boolean runWithOneFault(DriverCall kind, int n, int code, long seed, long handleCap) {
        return runWithOneFault(kind, n, code, seed, handleCap, VmmConfig.DEFAULTS.smallLimitBytes());
    }

    /**
     * Returns true when the planned fault was injected. {@code handleCap} 0: adaptive handle sizes;
     * requests up to {@code smallLimit} go to the small region.
     */
    private static boolean runWithOneFault(DriverCall kind, int n, int code, long seed, long handleCap, long smallLimit) {
        String note = kind + " #" + n + " fails with " + CudaResult.name(code) + ", seed=" + seed + ", handle cap " + handleCap
                + ", small limit " + smallLimit;
        FaultPlan plan = new FaultPlan(seed).failNth(kind, n, code);
        runWithFaults(plan, seed, handleCap, smallLimit, 1.0, 8 * MIB, note);
        return plan.injected(kind) > 0;
    }

    /**
     * Faults in several kinds of call at once, each at a random rate, so that one failure's
     * rollback meets another's (a failed unmap undoing a failed setAccess, a failed synchronisation
     * while a slow path recovers from out-of-memory): the allocator stays consistent throughout and
     * serves every request once the faults stop.
     */
    @ParameterizedTest(name = "seed {0}")
    @ValueSource(longs = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
    void faultsInSeveralKindsOfCallAtOnceLeaveTheAllocatorConsistent(long seed) {
        SplittableRandom rng = new SplittableRandom(seed);
        FaultPlan plan = new FaultPlan(seed);
        StringBuilder planned = new StringBuilder();
        for (DriverCall kind : MIXED_KINDS) {
            if (rng.nextInt(3) == 0) continue;
            double rate = 0.005 + rng.nextDouble() * 0.15;
            int code = rng.nextBoolean() ? CudaResult.OUT_OF_MEMORY : CudaResult.INVALID_VALUE;
            plan.failWithProbability(kind, rate, code);
            planned.append(String.format(" %s %.3f %s,", kind, rate, CudaResult.name(code)));
        }
        long handleCap = new long[]{0, PAGE, 4 * PAGE}[rng.nextInt(3)];
        long smallLimit = rng.nextBoolean() ? VmmConfig.DEFAULTS.smallLimitBytes() : 16 * KIB;
        double slack = rng.nextBoolean() ? 1.0 : 1.25;
        long capacity = rng.nextBoolean() ? 8 * MIB : 32 * MIB;
        String note = "seed=" + seed + ", faults" + planned + " handle cap " + handleCap + ", small limit " + smallLimit
                + ", slack " + slack + ", capacity " + capacity;
        runWithFaults(plan, seed, handleCap, smallLimit, slack, capacity, note);
        long injected = 0;
        for (DriverCall kind : MIXED_KINDS) injected += plan.injected(kind);
        assertTrue(injected > 0, note + ": no fault was injected");
    }

    /** A workload with the plan's faults, then one without; every check of the model on the way and at the end. */
    private static void runWithFaults(FaultPlan plan, long seed, long handleCap, long smallLimit, double slack,
                                      long capacity, String note) {
        HostDriver host = hostDriver(capacity);
        try {
            // A small address space per region adds regions (RESERVE) often; a small pool limit
            // releases handles (RELEASE) on the slow path too.
            VmmConfig d = smallConfig(4 * PAGE);
            VmmConfig config = new VmmConfig(d.addressSpaceBytes(), d.chunkBytes(), smallLimit, d.alignmentBytes(), slack,
                    2 * PAGE, d.fragRatio()).withHandleCapBytes(handleCap);
            VmmManager m = VmmManager.withFenceOnCallingThread(new FaultInjectingDriver(host, plan), config);
            SplittableRandom rng = new SplittableRandom(seed);
            LiveModel model = new LiveModel();

            workload(m, host, model, rng, 300, true, note + ", faulty phase");
            assertEquals(0, m.deviceWideFence().requestsDriving(),
                    note + ": a failed slow path still counts as inside its driver calls (would hold the fence's synchronisations)");
            plan.clear();
            workload(m, host, model, rng, 120, false, note + ", after the faults stopped");

            for (LiveModel.Live l : new ArrayList<>(model.live.values())) {
                assertFullyIntact(host, l.address(), l.size(), l.seed(), note + ", final check");
                m.deallocate(l.address(), l.stream());
                model.freed(l.address());
            }
            model.assertStatsMatch(m, note);
            assertEquals(0, m.stats().liveBytes(), note);
            m.drain();
            m.close();
            HostDriver.Usage usage = host.usage();
            assertTrue(usage.isEmpty(), note + ": after close the driver still holds " + usage);
        } finally {
            host.close();
        }
    }

    private static void workload(VmmManager m, HostDriver host, LiveModel model, SplittableRandom rng, int ops,
                                 boolean failuresAllowed, String note) {
        for (int op = 0; op < ops; op++) {
            String ctx = note + ", op " + op;
            int dice = rng.nextInt(100);
            try {
                if (dice < 55 || model.live.isEmpty()) {
                    long size = randomSize(rng, Long.MAX_VALUE);
                    long stream = STREAMS[rng.nextInt(STREAMS.length)];
                    long address = m.allocate(size, stream);
                    long patternSeed = rng.nextLong();
                    model.allocated(address, size, patternSeed, stream, 512, ctx);
                    fill(host, address, size, patternSeed, ctx);
                } else if (dice < 93) {
                    LiveModel.Live victim = model.pick(rng);
                    assertFullyIntact(host, victim.address(), victim.size(), victim.seed(), ctx + " (at free)");
                    m.deallocate(victim.address(), victim.stream());
                    model.freed(victim.address());
                } else {
                    m.drain();
                }
            } catch (DriverException | OutOfDeviceMemoryException e) {
                if (!failuresAllowed) fail(ctx + ": failed although no fault is planned", e);
            }
            model.assertStatsMatch(m, ctx);
            assertEquals(host.usage().aliveBytes(), m.stats().reservedBytes(),
                    ctx + ": the allocator's physical bytes equal what the driver holds");
            if (dice >= 93 || op % 20 == 0) model.assertAllIntact(host, ctx);
        }
    }

    /**
     * Two faults at once: granting access fails, and so does the unmap that should undo the map.
     * The page stays mapped in the driver, so the allocator must neither offer that address range
     * again (the next map there would fail) nor pool the handle as if it were unmapped (it would
     * be mapped a second time, aliasing two allocations).
     */
    @ParameterizedTest(name = "set access #{0} fails, its rollback unmap fails")
    @ValueSource(ints = {1, 2, 3, 4, 5})
    void aMapThatCannotBeUndoneIsSetAsideAndNeverReused(int n) {
        HostDriver host = hostDriver(8 * MIB);
        try {
            FaultPlan plan = new FaultPlan(n)
                    .failNth(DriverCall.SET_ACCESS, n, CudaResult.OUT_OF_MEMORY)
                    .failNth(DriverCall.UNMAP, 1, CudaResult.INVALID_VALUE);
            VmmManager m = VmmManager.withFenceOnCallingThread(new FaultInjectingDriver(host, plan), smallConfig(4 * PAGE));
            LiveModel model = new LiveModel();
            SplittableRandom rng = new SplittableRandom(n);
            String note = "set access #" + n + " and the next unmap fail";
            workload(m, host, model, rng, 100, true, note);
            assertEquals(1, plan.injected(DriverCall.SET_ACCESS), note + ": the set access fault happened");
            plan.clear();
            workload(m, host, model, rng, 200, false, note + ", after the faults stopped");
            for (LiveModel.Live l : new ArrayList<>(model.live.values())) {
                assertFullyIntact(host, l.address(), l.size(), l.seed(), note + ", final check");
                m.deallocate(l.address(), l.stream());
            }
            m.close();
            assertTrue(host.usage().isEmpty(), note + ": after close the driver still holds " + host.usage());
        } finally {
            host.close();
        }
    }

    // ------------------------------------------------------------------ out-of-memory recovery

    /**
     * Memory cached in one size class is released when the other one runs out: the driver's
     * out-of-memory becomes a drain and a retry that succeeds. (A budget above the device, so the
     * driver runs out before the budget would move the small region's pages.)
     */
    @Test
    void outOfMemoryAtCapacityIsRecoveredByDrainAndRetry() {
        HostDriver host = hostDriver(4 * MIB);
        try (VmmManager m = new VmmManager(host, smallConfig(64 * MIB).withReserveSlack(2.0))) {
            List<Long> small = new ArrayList<>();
            for (int i = 0; i < 48; i++) small.add(m.allocate(PAGE, 0));
            for (long a : small) m.deallocate(a, 0);
            long cached = m.stats().cachedBytes();
            assertEquals(48 * PAGE, cached, "the small region caches its freed pages");

            long big = m.allocate(2 * MIB, 0); // large region: needs 32 new pages, 16 are left
            fill(host, big, 2 * MIB, 77);
            AllocatorStats s = m.stats();
            assertEquals(1, s.outOfMemoryRecoveries(), "one drain-and-retry: " + s);
            assertTrue(s.cachedBytes() < cached, "the cache was drained: " + s);
            assertEquals(host.usage().aliveBytes(), s.reservedBytes());
            assertFullyIntact(host, big, 2 * MIB, 77, "the recovered allocation");
            m.deallocate(big, 0);
        } finally {
            assertTrue(host.usage().isEmpty(), "nothing leaks: " + host.usage());
            host.close();
        }
    }

    @Test
    void anImpossibleRequestFailsWithTheFiguresAndLeavesTheAllocatorUsable() {
        HostDriver host = hostDriver(4 * MIB);
        try (VmmManager m = new VmmManager(host, smallConfig(64 * MIB))) {
            long live = m.allocate(3 * MIB, 0);
            fill(host, live, 3 * MIB, 5);
            long cachedSmall = m.allocate(100 * KIB, 1);
            m.deallocate(cachedSmall, 1);

            OutOfDeviceMemoryException e = assertThrows(OutOfDeviceMemoryException.class,
                    () -> m.allocate(2 * MIB, 0));
            assertEquals(2 * MIB, e.requestedBytes());
            assertEquals(3 * MIB, e.liveBytes());
            assertTrue(e.reservedBytes() >= 3 * MIB && e.reservedBytes() <= 4 * MIB, e.getMessage());
            assertTrue(e.deviceFreeBytes() >= 0 && e.deviceFreeBytes() < 2 * MIB, e.getMessage());
            assertTrue(e.getMessage().contains("requested " + 2 * MIB), e.getMessage());
            assertTrue(e.getMessage().contains("live " + 3 * MIB), e.getMessage());
            assertTrue(e.getCause() instanceof DriverException de && de.isOutOfMemory(), "the driver's error is the cause");

            AllocatorStats s = m.stats();
            assertEquals(3 * MIB, s.liveBytes());
            assertEquals(1, s.allocations() - s.frees());
            assertEquals(host.usage().aliveBytes(), s.reservedBytes(), "the failed attempt left no handle behind");
            assertFullyIntact(host, live, 3 * MIB, 5, "the live allocation");

            m.deallocate(live, 0);
            long retry = m.allocate(2 * MIB, 0);
            fill(host, retry, 2 * MIB, 6);
            m.deallocate(retry, 0);
        } finally {
            assertTrue(host.usage().isEmpty(), "nothing leaks: " + host.usage());
            host.close();
        }
    }
}
