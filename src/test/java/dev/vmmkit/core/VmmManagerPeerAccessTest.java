package dev.vmmkit.core;

import dev.vmmkit.compute.Computes;
import dev.vmmkit.compute.DeviceCompute;
import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.FaultInjectingDriver;
import dev.vmmkit.driver.FaultPlan;
import dev.vmmkit.driver.DeviceBytes;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static dev.vmmkit.core.AllocatorTestSupport.KIB;
import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.PAGE;
import static dev.vmmkit.core.AllocatorTestSupport.smallConfig;
import static dev.vmmkit.core.AllocatorTestSupport.twoRegionConfig;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Peer access on two emulated devices: device 0's manager grants device 1, which then reads what
 * device 0 wrote, through its own view of the memory; revoking takes that away; a grant that fails
 * part way leaves no trace.
 */
class VmmManagerPeerAccessTest {
    private final HostDriver device0 = HostDriver.builder().granularity(PAGE).capacity(64 * MIB).deviceCount(2).device(0).build();
    private final HostDriver device1 = HostDriver.builder().granularity(PAGE).capacity(64 * MIB).deviceCount(2).device(1).build();
    private final DeviceBytes viewOf0 = device0.deviceBytes(), viewOf1 = device1.deviceBytes();

    @AfterEach
    void close() {
        device0.close();
        device1.close();
    }

    /** Allocations of mixed sizes, each filled through device 0 with its own pattern. */
    private static List<long[]> allocateAndFill(VmmManager manager, DeviceBytes bytes, int count, long seed) {
        List<long[]> live = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            long size = (i % 3 == 0 ? 3 * PAGE : 8 * KIB) + 64 * i;
            long address = manager.allocate(size, 0);
            long filled = size & -8;
            bytes.fill(address, filled, seed + i);
            live.add(new long[]{address, filled, seed + i});
        }
        return live;
    }

    @Test
    void aWriteThroughDeviceZeroIsReadThroughDeviceOnesGrant() {
        try (VmmManager manager = new VmmManager(device0, twoRegionConfig(64 * MIB, 16 * KIB))) {
            List<long[]> before = allocateAndFill(manager, viewOf0, 12, 100);
            long[] first = before.getFirst();
            assertThrows(IllegalStateException.class, () -> viewOf1.readLong(first[0]), "no grant yet");

            long setAccessBefore = manager.stats().driverCalls().get(DriverCall.SET_ACCESS);
            manager.peerAccess().grant(1);
            long grantCalls = manager.stats().driverCalls().get(DriverCall.SET_ACCESS) - setAccessBefore;
            int[] runs = {0};
            for (RegionHeapCount r : RegionHeapCount.of(manager)) runs[0] += r.runs;
            assertEquals(runs[0], grantCalls, "one setAccess per mapped run, not per page");
            assertTrue(grantCalls < 12, "fewer calls than allocations: " + grantCalls);
            for (long[] a : before) assertEquals(-1, viewOf1.firstMismatch(a[0], a[1], a[2]));

            // Later mappings name the peer at once, with no extra call.
            List<long[]> after = allocateAndFill(manager, viewOf0, 6, 500);
            for (long[] a : after) assertEquals(-1, viewOf1.firstMismatch(a[0], a[1], a[2]));
            viewOf1.writeLong(first[0], 77);
            assertEquals(77, viewOf0.readLong(first[0]), "device 1 writes, device 0 sees it");

            manager.peerAccess().grant(1); // twice: nothing to do
            assertEquals(1L << 1, manager.peerAccess().peers());

            manager.peerAccess().revoke(1);
            assertEquals(0, manager.peerAccess().peers());
            for (long[] a : before) assertThrows(IllegalStateException.class, () -> viewOf1.readLong(a[0]), "revoked");
            long fresh = manager.allocate(5 * PAGE, 0);
            assertThrows(IllegalStateException.class, () -> viewOf1.readLong(fresh));
            assertEquals(77, viewOf0.readLong(first[0]), "the owner keeps its access");
        }
        assertTrue(device0.usage().isEmpty(), device0.usage().toString());
    }

    /** A kernel on device 1 adds device 0's tensor into its own: it faults without the grant and works with it. */
    @Test
    void aKernelOnThePeerReadsAGrantedTensor() {
        try (VmmManager manager0 = new VmmManager(device0, smallConfig(64 * MIB));
             VmmManager manager1 = new VmmManager(device1, smallConfig(64 * MIB));
             DeviceCompute kernels0 = Computes.open(device0);
             DeviceCompute kernels1 = Computes.open(device1)) {
            int n = 1000;
            long onDevice0 = manager0.allocate(n * 4L, 0), onDevice1 = manager1.allocate(n * 4L, 0);
            float[] values = new float[n];
            for (int i = 0; i < n; i++) values[i] = i * 0.5f;
            kernels0.copyFromHost(onDevice0, values);
            kernels1.fill(onDevice1, n, 1f);
            DriverException fault = assertThrows(DriverException.class,
                    () -> kernels1.add(onDevice1, onDevice1, onDevice0, n, n));
            assertEquals(CudaResult.ILLEGAL_ADDRESS, fault.result());
            manager0.peerAccess().grant(1);
            kernels1.add(onDevice1, onDevice1, onDevice0, n, n);
            float[] sums = new float[n];
            kernels1.copyToHost(sums, onDevice1);
            for (int i = 0; i < n; i++) assertEquals(1f + i * 0.5f, sums[i]);
        }
    }

    @Test
    void aFaultDuringTheGrantRollsItBack() {
        FaultPlan plan = new FaultPlan();
        FaultInjectingDriver faulty = new FaultInjectingDriver(device0, plan);
        try (VmmManager manager = new VmmManager(faulty, twoRegionConfig(64 * MIB, 16 * KIB))) {
            List<long[]> live = allocateAndFill(manager, viewOf0, 12, 7);
            // Spread the allocations over several runs: free every other large one and map more.
            assertTrue(RegionHeapCount.totalRuns(manager) >= 2, "the test needs several runs");
            plan.failNth(DriverCall.SET_ACCESS, 2, CudaResult.OUT_OF_MEMORY);
            DriverException failure = assertThrows(DriverException.class, () -> manager.peerAccess().grant(1));
            assertEquals(CudaResult.OUT_OF_MEMORY, failure.result());
            assertEquals(0, manager.peerAccess().peers(), "the peer is not granted");
            for (long[] a : live) {
                assertFalse(device0.isAccessibleTo(1, a[0], a[1]), "rolled back");
                assertEquals(-1, viewOf0.firstMismatch(a[0], a[1], a[2]), "the owner's bytes are intact");
            }
            long later = manager.allocate(4 * PAGE, 0);
            assertFalse(device0.isAccessibleTo(1, later, 8), "later mappings do not name it either");
            plan.clear();
            manager.peerAccess().grant(1);
            for (long[] a : live) assertEquals(-1, viewOf1.firstMismatch(a[0], a[1], a[2]));
        }
    }

    @Test
    void aManagerCannotBeItsOwnPeer() {
        try (VmmManager manager = new VmmManager(device0, smallConfig(64 * MIB))) {
            assertThrows(IllegalArgumentException.class, () -> manager.peerAccess().grant(0));
            assertThrows(IllegalArgumentException.class, () -> manager.peerAccess().grant(64));
            manager.allocate(PAGE, 0);
            DriverException unknown = assertThrows(DriverException.class, () -> manager.peerAccess().grant(5));
            assertEquals(CudaResult.INVALID_DEVICE, unknown.result(), "the emulated machine has two devices");
            assertEquals(0, manager.peerAccess().peers());
        }
    }

    /** Grants and revocations while other threads allocate, free and write: every live allocation ends up right. */
    @Test
    void grantsRaceWithAllocationsOnOtherThreads() throws Exception {
        try (VmmManager manager = new VmmManager(device0, twoRegionConfig(64 * MIB, 16 * KIB))) {
            java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
            java.util.concurrent.ConcurrentLinkedQueue<long[]> live = new java.util.concurrent.ConcurrentLinkedQueue<>();
            List<Thread> workers = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                int id = t;
                workers.add(Thread.ofPlatform().start(() -> {
                    java.util.SplittableRandom rng = new java.util.SplittableRandom(id);
                    List<long[]> mine = new ArrayList<>();
                    while (!stop.get()) {
                        if (mine.size() < 20 && rng.nextBoolean()) {
                            long size = (rng.nextBoolean() ? 2 * PAGE : 4 * KIB) + 8 * rng.nextInt(100);
                            long address = manager.allocate(size, 0);
                            viewOf0.fill(address, size & -8, id * 1000L + mine.size());
                            mine.add(new long[]{address, size & -8, id * 1000L + mine.size()});
                        } else if (!mine.isEmpty()) {
                            long[] gone = mine.remove(rng.nextInt(mine.size()));
                            manager.deallocate(gone[0], 0);
                        }
                    }
                    live.addAll(mine);
                }));
            }
            for (int round = 0; round < 40; round++) {
                manager.peerAccess().grant(1);
                manager.peerAccess().revoke(1);
            }
            manager.peerAccess().grant(1);
            stop.set(true);
            for (Thread worker : workers) worker.join();
            for (long[] a : live) assertEquals(-1, viewOf1.firstMismatch(a[0], a[1], a[2]), "granted after the race");
            manager.peerAccess().revoke(1);
            for (long[] a : live) assertFalse(device0.isAccessibleTo(1, a[0], a[1]), "revoked after the race");
        }
    }

    /** Counts the mapped runs of a manager's regions, as the grant must visit them. */
    record RegionHeapCount(int runs) {
        static List<RegionHeapCount> of(VmmManager manager) {
            List<RegionHeapCount> all = new ArrayList<>();
            for (RegionHeap region : manager.regionsForTest()) {
                int[] runs = {0};
                region.forEachMappedRun((va, size) -> runs[0]++);
                all.add(new RegionHeapCount(runs[0]));
            }
            return all;
        }

        static int totalRuns(VmmManager manager) {
            return of(manager).stream().mapToInt(RegionHeapCount::runs).sum();
        }
    }
}
