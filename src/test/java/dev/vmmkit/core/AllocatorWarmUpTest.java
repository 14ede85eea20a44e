package dev.vmmkit.core;

import dev.vmmkit.driver.DryDriver;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;

import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.PAGE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The start-up warm-up changes nothing a program can observe: it keeps no memory and no handle of
 * the driver it runs on, and a manager working beside it ends with the same stats, driver calls
 * and memory as one working alone.
 */
class AllocatorWarmUpTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(60);

    @Test
    void onARealEmulatedDeviceItLeavesNothingBehind() {
        onAnEmulatedDevice(3L << 30, host -> assertEquals(3,
                AllocatorWarmUp.run(host, VmmConfig.DEFAULTS.withAddressSpaceBytes(4L << 30), 3, () -> true),
                "every round ran: none failed"));
    }

    /** Runs {@code warmUp} on a fresh emulated device of {@code capacity} bytes; checks it kept no handle and no memory. */
    private static void onAnEmulatedDevice(long capacity, java.util.function.Consumer<HostDriver> warmUp) {
        HostDriver host = HostDriver.builder().granularity(PAGE).capacity(capacity).build();
        try {
            warmUp.accept(host);
            assertTrue(host.usage().isEmpty(), "the warm-up keeps nothing: " + host.usage());
            assertEquals(host.memoryInfo().totalBytes(), host.memoryInfo().freeBytes(), "no device memory kept");
        } finally {
            host.close();
        }
    }

    @Test
    void onTheDryDriverEveryRoundRuns() {
        // A round that fails ends the warm-up silently: the rounds done say whether any did.
        assertEquals(AllocatorWarmUp.ROUNDS, AllocatorWarmUp.run(new DryDriver(2 * MIB, 4L << 30), VmmConfig.DEFAULTS,
                AllocatorWarmUp.ROUNDS, () -> true));
    }

    @Test
    void aTagsCyclesOnAnEmulatedDeviceLeaveNothingBehind() {
        onAnEmulatedDevice(1L << 30, host -> assertEquals(20,
                AllocatorWarmUp.cycleATag(host, VmmConfig.DEFAULTS.withAddressSpaceBytes(2L << 30), 20, () -> true),
                "every cycle ran: none failed"));
    }

    @Test
    void aTagsCyclesStopWhenAsked() {
        AtomicInteger asked = new AtomicInteger();
        assertEquals(3, AllocatorWarmUp.cycleATag(new DryDriver(2 * MIB, 4L << 30), VmmConfig.DEFAULTS, AllocatorWarmUp.TAG_CYCLES,
                () -> asked.incrementAndGet() <= 3));
    }

    @Test
    void theFenceThreadsOfItsFirstRoundsEndWithThem() {
        long before = fenceThreads();
        assertEquals(AllocatorWarmUp.ROUNDS_WITH_FENCE_THREAD + 1, AllocatorWarmUp.run(new DryDriver(2 * MIB, 4L << 30),
                VmmConfig.DEFAULTS, AllocatorWarmUp.ROUNDS_WITH_FENCE_THREAD + 1, () -> true), "every round ran");
        assertTrue(fenceThreads() <= before, "no fence thread of the warm-up's managers is left running");
    }

    private static long fenceThreads() {
        return Thread.getAllStackTraces().keySet().stream()
                .filter(t -> t.isAlive() && t.getName().equals(DeviceWideFence.THREAD_NAME)).count();
    }

    @Test
    void itStopsWhenAsked() {
        AtomicInteger asked = new AtomicInteger();
        int rounds = AllocatorWarmUp.run(new DryDriver(2 * MIB, 4L << 30), VmmConfig.DEFAULTS, 100,
                () -> asked.incrementAndGet() <= 2);
        assertEquals(2, rounds);
    }

    @Test
    void aManagerWorkingBesideItEndsAsOneWorkingAlone() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            AllocatorStats alone = program(null);
            CountDownLatch started = new CountDownLatch(1);
            Thread warmUp = Thread.ofPlatform().start(() -> {
                started.countDown();
                AllocatorWarmUp.run(new DryDriver(2 * MIB, 4L << 30), VmmConfig.DEFAULTS, AllocatorWarmUp.ROUNDS, () -> true);
            });
            AllocatorStats beside = program(started);
            warmUp.join();
            assertEquals(alone.allocations(), beside.allocations());
            assertEquals(alone.frees(), beside.frees());
            assertEquals(alone.peakLiveBytes(), beside.peakLiveBytes());
            assertEquals(alone.peakReservedBytes(), beside.peakReservedBytes());
            assertEquals(alone.reservedBytes(), beside.reservedBytes());
            assertEquals(alone.driverCalls(), beside.driverCalls(), "the program's driver calls are its own");
        });
    }

    /** A fixed sequence on a fresh emulated device (after {@code start}, when given); checks it leaks nothing. */
    private static AllocatorStats program(CountDownLatch start) throws InterruptedException {
        if (start != null) start.await();
        HostDriver host = HostDriver.builder().granularity(PAGE).capacity(64 * MIB).build();
        try {
            AllocatorStats stats;
            try (VmmManager m = VmmManager.withFenceOnCallingThread(host, VmmConfig.DEFAULTS.withAddressSpaceBytes(128 * MIB))) {
                long[] held = new long[12];
                for (int round = 0; round < 20; round++) {
                    for (int i = 0; i < held.length; i++) held[i] = m.allocate((i + 1) * PAGE + round * 512L, round % 3);
                    for (int i = 0; i < held.length; i += 2) m.deallocate(held[i], VmmManager.DEVICE_WIDE_STREAM);
                    for (int i = 1; i < held.length; i += 2) m.deallocate(held[i], round % 3);
                }
                stats = m.stats();
            }
            assertTrue(host.usage().isEmpty(), "the program's manager released everything: " + host.usage());
            return stats;
        } finally {
            host.close();
        }
    }
}
