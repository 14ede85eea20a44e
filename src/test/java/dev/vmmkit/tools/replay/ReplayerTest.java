package dev.vmmkit.tools.replay;

import dev.vmmkit.driver.host.HostDeviceBytes;

import dev.vmmkit.core.AllocatorStats;
import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.core.OutOfDeviceMemoryException;
import dev.vmmkit.trace.AllocationTrace;
import dev.vmmkit.trace.TestTraces;
import dev.vmmkit.trace.TraceReader;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.Map;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

class ReplayerTest {

    /** Live at most: 4096 + 10000 + 512 bytes, at line 4. */
    private static final String SMALL = """
            # small
            alloc,1,4096,0
            alloc,2,10000,0
            alloc,3,512,7
            free_completed,1,4096,0
            free_completed,3,512,7
            alloc,4,100,0
            free_completed,2,10000,0
            """;

    @Test
    void reportsCountsPeaksAndDriverCallsOfTheResource() throws IOException {
        AllocationTrace trace = TestTraces.parse(SMALL);
        ReplayReport report;
        try (MallocAllocator malloc = new MallocAllocator()) {
            report = new Replayer(trace).replay(malloc);
        }

        assertEquals(7, report.ops());
        assertEquals(4, report.allocs());
        assertEquals(3, report.frees());
        assertEquals(4096 + 10000 + 512, report.peakLiveBytes());
        assertEquals(trace.peakLiveBytes(), report.peakLiveBytes());
        assertEquals(4096 + 10240 + 512, report.peakReservedBytes(), "sizes rounded to 512 by malloc's user");
        assertEquals((4096 + 10240 + 512) / (double) (4096 + 10000 + 512), report.fragmentationRatio(), 1e-12);
        assertEquals(new ReplayReport.DriverCalls(0, 4, 0, 0, 0, 3, 0), report.driverCalls());
        assertEquals(0.0, report.hitRate());
    }

    @Test
    void timesEveryCall() throws IOException {
        AllocationTrace trace = TestTraces.parse(SMALL);
        ReplayReport report;
        try (MallocAllocator malloc = new MallocAllocator()) {
            report = new Replayer(trace).replay(malloc);
        }

        assertTrue(report.allocNs().p50() > 0 && report.allocNs().p50() <= report.allocNs().p99(), report.toString());
        assertTrue(report.freeNs().p50() > 0 && report.freeNs().p50() <= report.freeNs().p99(), report.toString());
        assertTrue(report.wallNsPerOp() > 0, report.toString());
    }

    @Test
    void percentilesAreNearestRank() {
        long[] samples = new long[120];
        for (int i = 0; i < 100; i++) samples[i] = 100 - i;   // 100..1, unsorted; the tail is not a sample

        ReplayReport.Latency latency = ReplayReport.Latency.of(samples, 100);

        assertEquals(new ReplayReport.Latency(50, 99), latency);
        assertEquals(new ReplayReport.Latency(7, 7), ReplayReport.Latency.of(new long[] {7}, 1));
        assertEquals(new ReplayReport.Latency(0, 0), ReplayReport.Latency.of(new long[0], 0));
        assertEquals(new ReplayReport.Latency(2, 3), ReplayReport.Latency.of(new long[] {3, 1, 2}, 3));
    }

    @Test
    void aReplayerReplaysAgainWithFreshFigures() throws IOException {
        Replayer replayer = new Replayer(TestTraces.parse(SMALL));
        for (int run = 0; run < 3; run++) {
            try (MallocAllocator malloc = new MallocAllocator()) {
                ReplayReport report = replayer.replay(malloc);
                assertEquals(7, report.ops());
                assertEquals(4096 + 10000 + 512, report.peakLiveBytes());
            }
        }
    }

    @Test
    void zeroByteRequestsGoThroughAsCudaMallocWouldTakeThem() throws IOException {
        AllocationTrace trace = TestTraces.parse("alloc,1,0,0\nalloc,2,512,0\nfree_completed,1,0,0\n");
        try (MallocAllocator malloc = new MallocAllocator()) {
            ReplayReport report = new Replayer(trace).replay(malloc, new PatternCheck(HostDeviceBytes.unchecked()));

            assertEquals(3, report.ops());
            assertEquals(512, report.peakLiveBytes());
        }
    }

    @Test
    void replaysTheRealBertTraceWithVerifyAndAgreesOnPeakLive() throws IOException {
        Path bert = TestTraces.bert().orElse(null);
        assumeTrue(bert != null, "shared/traces/bert_infer.csv.gz not found");
        AllocationTrace trace = TraceReader.read(bert);

        ReplayReport report;
        try (MallocAllocator malloc = new MallocAllocator()) {
            report = new Replayer(trace).replay(malloc, new PatternCheck(HostDeviceBytes.unchecked()));
        }

        assertEquals(TestTraces.BERT_ALLOCS, report.allocs());
        assertEquals(TestTraces.BERT_FREES, report.frees());
        assertEquals(TestTraces.BERT_PEAK_LIVE_BYTES, trace.peakLiveBytes());
        assertEquals(trace.peakLiveBytes(), report.peakLiveBytes(), "allocator and trace agree on peak live");
        assertEquals(TestTraces.BERT_ALLOCS, report.driverCalls().create());
    }

    @Test
    void verifyCatchesTwoLiveAllocationsSharingMemory() throws IOException {
        AllocationTrace trace = TestTraces.parse("""
                # two allocations, same memory
                alloc,10,8192,0
                alloc,20,8192,0
                free_completed,10,8192,0
                """);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment memory = arena.allocate(8192, 4096);
            ReplayTarget aliasing = new FixedAddressTarget(memory.address());

            ReplayException e = assertThrows(ReplayException.class,
                    () -> new Replayer(trace).replay(aliasing, new PatternCheck(HostDeviceBytes.unchecked())));

            assertEquals(String.format("test.csv:4: verify failed: allocation of key 10 at 0x%x (8192 bytes) changed"
                    + " at byte 0 while live (memory shared with another allocation?)", memory.address()), e.getMessage());
        }
    }

    @Test
    void aFailedRequestNamesTheTraceLine() throws IOException {
        AllocationTrace trace = TestTraces.parse("alloc,1,512,0\nalloc,2,1073741824,0\n");
        ReplayTarget refusesBigOnes = new FixedAddressTarget(4096) {
            @Override
            public long allocate(long size, long stream) {
                if (size > 4096) throw new OutOfDeviceMemoryException(size, 512, 2 << 20, 0, null);
                return super.allocate(size, stream);
            }
        };

        ReplayException e = assertThrows(ReplayException.class, () -> new Replayer(trace).replay(refusesBigOnes));

        assertTrue(e.getMessage().startsWith("test.csv:2: alloc of 1073741824 bytes failed (key 2): out of device memory"),
                e.getMessage());
        assertInstanceOf(OutOfDeviceMemoryException.class, e.getCause());
    }

    @Test
    void patternCheckFindsTheFirstChangedWordInHeadOrTail() {
        try (Arena arena = Arena.ofConfined()) {
            for (long size : new long[] {8, 104, 4096, 5008, 8192, 100_000}) {
                MemorySegment memory = arena.allocate(size);
                PatternCheck check = new PatternCheck(HostDeviceBytes.unchecked());
                check.stamp(42, memory.address(), size);
                assertEquals(-1, check.firstDifference(42, memory.address(), size), "intact, size " + size);
                assertTrue(check.firstDifference(43, memory.address(), size) >= 0, "other key, size " + size);

                long last = size - 1;
                memory.set(JAVA_BYTE, last, (byte) ~memory.get(JAVA_BYTE, last));
                // Checks work in 8-byte words: the changed byte is reported as its word's offset.
                assertEquals(size - 8, check.firstDifference(42, memory.address(), size), "last byte changed, size " + size);
            }
        }
    }

    /** Hands out one address for every request: the simplest broken allocator. */
    private static class FixedAddressTarget implements ReplayTarget, DeviceMemoryResource {
        private final long address;

        FixedAddressTarget(long address) {
            this.address = address;
        }

        @Override
        public long allocate(long size, long stream) {
            return address;
        }

        @Override
        public void deallocate(long address, long stream) {
        }

        @Override
        public DeviceMemoryResource resource() {
            return this;
        }

        @Override
        public AllocatorStats stats() {
            return new AllocatorStats(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, Map.of());
        }

        @Override
        public void close() {
        }
    }
}
