package dev.vmmkit.trace;

import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.core.DeviceWideFreeClock;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.StringWriter;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A cudaFree in a trace: its {@code free_requested} on the device-wide stream is the request, and
 * its {@code free_completed}, written once the device finished the work before it, is when its
 * memory came back.
 */
class CudaFreeTraceTest {
    private static final String DEVICE_WIDE = Long.toUnsignedString(DeviceMemoryResource.DEVICE_WIDE_STREAM);

    @Test
    void aCudaFreeIsAFreeAtItsRequestAndACoverAtItsCompletion() throws IOException {
        AllocationTrace trace = TestTraces.parse(String.join("\n",
                "alloc,4096,1000,0",
                "alloc,8192,3000,0",
                "free_requested,4096,1000," + DEVICE_WIDE,
                "alloc,12288,1500,0",
                "free_requested,8192,3000," + DEVICE_WIDE,
                "free_completed,4096,1000," + DEVICE_WIDE,
                "free_completed,8192,3000," + DEVICE_WIDE,
                "alloc,4096,2000,0", ""));

        assertEquals(List.of(AllocationTrace.ALLOC, AllocationTrace.ALLOC, AllocationTrace.FREE, AllocationTrace.ALLOC,
                AllocationTrace.FREE, AllocationTrace.COVER, AllocationTrace.COVER, AllocationTrace.ALLOC), kinds(trace));
        assertEquals(4, trace.allocs());
        assertEquals(2, trace.frees());
        assertEquals(2, trace.covers());
        assertEquals(DeviceMemoryResource.DEVICE_WIDE_STREAM, trace.stream(2));
        assertEquals(0, trace.coveredFree(5), "the first cudaFree");
        assertEquals(1, trace.coveredFree(6), "the second cudaFree");
        assertEquals(4500, trace.peakLiveBytes(), "live bytes drop at the request: 3000 + 1500, not 1000 + 3000 + 1500");
    }

    @Test
    void aKeyFreedAgainBeforeItsCompletionWasReadHadItsMemoryBack() throws IOException {
        AllocationTrace trace = TestTraces.parse(String.join("\n",
                "alloc,4096,1000,0",
                "free_requested,4096,1000," + DEVICE_WIDE,
                "alloc,4096,1000,0",
                "free_requested,4096,1000," + DEVICE_WIDE,
                "free_completed,4096,1000," + DEVICE_WIDE,
                "free_completed,4096,1000," + DEVICE_WIDE, ""));

        assertEquals(List.of(AllocationTrace.ALLOC, AllocationTrace.FREE, AllocationTrace.ALLOC, AllocationTrace.COVER,
                AllocationTrace.FREE, AllocationTrace.COVER), kinds(trace));
        assertEquals(0, trace.coveredFree(3));
        assertEquals(1, trace.coveredFree(5));
    }

    @Test
    void aCompletionWithoutItsRequestIsNamed() {
        TraceFormatException e = assertThrows(TraceFormatException.class, () -> TestTraces.parse(String.join("\n",
                "alloc,4096,1000,0",
                "free_completed,4096,1000," + DEVICE_WIDE, "")));
        assertTrue(e.getMessage().contains("test.csv:2") && e.getMessage().contains("without its free_requested"), e.getMessage());
    }

    @Test
    void theRecorderWritesEachCompletionBeforeTheFirstRequestBegunAfterItsMemoryCameBack() throws IOException {
        FakeClock clock = new FakeClock();
        List<String> lines = recorded(recorder -> {
            recorder.allocated(4096, 1000, 0);
            recorder.allocated(8192, 2000, 0);
            recorder.cudaFreeRequested(4096, 1000);
            clock.started = 3;
            recorder.cudaFreeReturned(4096, clock); // mark 3
            recorder.cudaFreeRequested(8192, 2000);
            clock.started = 4;
            recorder.cudaFreeReturned(8192, clock); // mark 4
            clock.completed = 3; // the synchronisation that started at 3 read neither free
            recorder.beforeAllocation();
            recorder.allocated(12288, 10, 0);
            clock.completed = 4; // the next one covers the first
            recorder.beforeAllocation();
            recorder.allocated(16384, 10, 7);
            recorder.beforeAllocation();
            clock.completed = 5; // covered while this allocation was made (it waited): after its line
            recorder.allocated(20480, 10, 7);
            recorder.freed(16384, 10, 7);
        });

        assertEquals(List.of(
                "alloc,4096,1000,0",
                "alloc,8192,2000,0",
                "free_requested,4096,1000," + DEVICE_WIDE,
                "free_requested,8192,2000," + DEVICE_WIDE,
                "alloc,12288,10,0",
                "free_completed,4096,1000," + DEVICE_WIDE,
                "alloc,16384,10,7",
                "alloc,20480,10,7",
                "free_completed,8192,2000," + DEVICE_WIDE,
                "free_requested,16384,10,7",
                "free_completed,16384,10,7"), lines);
    }

    @Test
    void aWaitGaveUpLineMarksTheAllocRightBeforeIt() throws IOException {
        AllocationTrace trace = TestTraces.parse(String.join("\n",
                "alloc,4096,1000,0",
                "free_requested,4096,1000," + DEVICE_WIDE,
                "alloc,8192,3000,0",
                "wait_gave_up,8192,3000,0",
                "free_completed,4096,1000," + DEVICE_WIDE,
                "alloc,12288,1000,0", ""));

        assertEquals(List.of(AllocationTrace.ALLOC, AllocationTrace.FREE, AllocationTrace.ALLOC, AllocationTrace.COVER,
                AllocationTrace.ALLOC), kinds(trace), "the line is no operation of its own");
        assertEquals(List.of(false, false, true, false, false),
                java.util.stream.IntStream.range(0, trace.ops()).mapToObj(trace::waitGaveUp).toList());
        assertEquals(1, trace.waitsGivenUp());
    }

    @Test
    void aWaitGaveUpLineAnywhereButRightAfterItsAllocIsNamed() {
        for (String misplaced : List.of(
                "alloc,4096,1000,0\nalloc,8192,10,0\nwait_gave_up,4096,1000,0\n", // another alloc between
                "alloc,4096,1000,0\nfree_requested,4096,1000,0\nfree_completed,4096,1000,0\nwait_gave_up,4096,1000,0\n",
                "wait_gave_up,4096,1000,0\n")) {
            TraceFormatException e = assertThrows(TraceFormatException.class, () -> TestTraces.parse(misplaced));
            assertTrue(e.getMessage().contains("wait_gave_up of key 4096") && e.getMessage().contains("right after the alloc"),
                    e.getMessage());
        }
    }

    @Test
    void theRecorderWritesAWaitGaveUpLineRightAfterTheAllocThatGaveUp() throws IOException {
        assertEquals(List.of("alloc,4096,1000,0", "alloc,8192,3000,0", "wait_gave_up,8192,3000,0"), recorded(recorder -> {
            recorder.allocated(4096, 1000, 0);
            recorder.allocatedAfterGivingUpWaiting(8192, 3000, DeviceMemoryResource.DEVICE_WIDE_STREAM);
        }));
    }

    @Test
    void aCudaFreeReusableAtOnceCompletesAtOnceOnTheDefaultStream() throws IOException {
        assertEquals(List.of("alloc,4096,1000,0", "free_requested,4096,1000,0", "free_completed,4096,1000,0"), recorded(recorder -> {
            recorder.allocated(4096, 1000, 0);
            recorder.freed(4096, 1000, DeviceMemoryResource.DEVICE_WIDE_STREAM);
        }));
    }

    /** The lines (comments left out) of a trace that {@code program} recorded. */
    private static List<String> recorded(java.util.function.Consumer<TraceFileRecorder> program) throws IOException {
        StringWriter text = new StringWriter();
        try (TraceFileRecorder recorder = new TraceFileRecorder(new TraceWriter(text, "test"), "test")) {
            program.accept(recorder);
        }
        return text.toString().lines().filter(l -> !l.startsWith("#")).toList();
    }

    private static List<Byte> kinds(AllocationTrace trace) {
        return java.util.stream.IntStream.range(0, trace.ops()).mapToObj(trace::kind).toList();
    }

    /** A clock the test moves: the started and completed tickets of a fence. */
    private static final class FakeClock implements DeviceWideFreeClock {
        long started;
        long completed;

        @Override
        public long markAfterFree(long address) {
            return started;
        }

        @Override
        public boolean covered(long address, long mark) {
            return completed > mark;
        }
    }
}
