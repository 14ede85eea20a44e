package dev.vmmkit.tools.replay;

import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.core.DeviceWideFreeClock;
import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.BeforeDeviceSyncDriver;
import dev.vmmkit.driver.VmmDriver;
import dev.vmmkit.driver.host.HostDriver;
import dev.vmmkit.trace.AllocationTrace;
import dev.vmmkit.trace.RecordingResource;
import dev.vmmkit.trace.TraceFileRecorder;
import dev.vmmkit.trace.TraceReader;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A program whose request past the budget gave up waiting for a cudaFree's memory (the device
 * still busy after the allocator's bound), recorded live on the host emulation and replayed: the
 * trace marks the request ({@code wait_gave_up}), and the replay gives up there too, so it holds
 * the live run's peak. Without the mark the replay's wait synchronises and reuses the memory.
 */
class GivenUpWaitReplayTest {
    private static final long MIB = 1 << 20;
    private static final VmmConfig CONFIG = VmmConfig.DEFAULTS.withPeakHintBytes(16 * MIB);

    @TempDir
    Path dir;

    @Test
    void aRequestThatGaveUpWaitingLiveGivesUpInTheReplayAndTheReplayHoldsTheLivePeak() throws Exception {
        Path file = dir.resolve("program.csv");
        long livePeak = assertTimeoutPreemptively(Duration.ofSeconds(30), () -> recordProgram(file));

        AllocationTrace trace = TraceReader.read(file);
        assertEquals(1, trace.waitsGivenUp(), "the second request gave up, and only it");
        assertTrue(trace.waitGaveUp(indexOfAlloc(trace, 1)));

        assertEquals(livePeak, replayPeak(trace), "the replay gives up where the program did");
        String unmarked = Files.readAllLines(file).stream().filter(l -> !l.startsWith("wait_gave_up"))
                .reduce("", (text, line) -> text + line + "\n");
        AllocationTrace withoutTheMark = TraceReader.read(
                new ByteArrayInputStream(unmarked.getBytes(StandardCharsets.UTF_8)), "unmarked.csv");
        assertTrue(replayPeak(withoutTheMark) < livePeak,
                "without the mark the replay's wait covers the free and reuses its memory");
    }

    /**
     * A live run on an H200 ({@code workloads.py busy_frees} under {@code vmmkit run --trace}, PyTorch's
     * cache off; its stats read a peak of 2,686,451,712 reserved bytes in each of three runs, two
     * requests giving up in each): the replay holds that peak to the byte, and without the marks
     * the replay's waits reuse the freed gigabyte instead.
     */
    @Test
    void aLiveRunOnTheGpuReplaysItsPeakWithItsGivenUpWaits() throws IOException {
        Path recorded = Path.of("src/test/resources/live-traces/busy_frees.csv.gz");
        AllocationTrace trace = TraceReader.read(recorded);
        assertEquals(2, trace.waitsGivenUp());
        assertEquals(2_686_451_712L, replayPeak(trace));

        String unmarked;
        try (var in = new java.util.zip.GZIPInputStream(Files.newInputStream(recorded))) {
            unmarked = new String(in.readAllBytes(), StandardCharsets.UTF_8).lines()
                    .filter(l -> !l.startsWith("wait_gave_up")).reduce("", (text, line) -> text + line + "\n");
        }
        AllocationTrace withoutTheMarks = TraceReader.read(
                new ByteArrayInputStream(unmarked.getBytes(StandardCharsets.UTF_8)), "unmarked.csv");
        assertTrue(replayPeak(withoutTheMarks) < 2_686_451_712L - (512L << 20), "the freed gigabyte reused");
    }

    /**
     * 16 MiB freed with cudaFree while the device is busy (its synchronisation held), then 12 MiB:
     * together past the budget of a 16 MiB peak, so the request waits, gives up and takes new
     * memory. Then the device finishes and 4 MiB more reuses the freed block. Returns the peak.
     */
    private static long recordProgram(Path file) throws IOException, InterruptedException {
        CountDownLatch deviceDone = new CountDownLatch(1);
        try (HostDriver host = HostDriver.open();
             TraceFileRecorder recorder = new TraceFileRecorder(file, "test")) {
            VmmManager manager = new VmmManager(heldSynchronisations(host, deviceDone), CONFIG);
            RecordingResource program = new RecordingResource(manager, recorder);
            DeviceWideFreeClock clock = manager.deviceWideFreeClock();
            long a = program.allocate(16 * MIB, 0);
            program.deallocate(a, DeviceMemoryResource.DEVICE_WIDE_STREAM);
            long mark = clock.markAfterFree(a);
            long b = program.allocate(12 * MIB, 0);
            deviceDone.countDown();
            while (!clock.covered(a, mark)) Thread.onSpinWait(); // the fence's thread synchronises
            long c = program.allocate(4 * MIB, 0);
            assertEquals(a, c, "the freed block came back once the device had finished");
            long peak = manager.stats().peakReservedBytes();
            assertEquals(1, manager.stats().freeWaitsGivenUp(), "the stats count the request that gave up");
            program.deallocate(b, DeviceMemoryResource.DEVICE_WIDE_STREAM);
            program.deallocate(c, DeviceMemoryResource.DEVICE_WIDE_STREAM);
            program.close();
            return peak;
        }
    }

    @Test
    void theReplaysReportCountsTheRequestsThatGaveUp() throws IOException {
        AllocationTrace trace = TraceReader.read(Path.of("src/test/resources/live-traces/busy_frees.csv.gz"));
        ReplayReport report = replay(trace).describing(trace);
        assertEquals(2, report.waitsGivenUp());
        assertTrue(ReplaySummary.format(trace.name(), "host", report).contains(
                "allocations that gave up waiting for cudaFree's memory (wait_gave_up), in the program and in the replay: 2"));
    }

    private static long replayPeak(AllocationTrace trace) {
        return replay(trace).peakReservedBytes();
    }

    private static ReplayReport replay(AllocationTrace trace) {
        try (HostDriver host = HostDriver.open()) {
            VmmManager manager = VmmManager.forReplay(host, CONFIG);
            try (ReplayTarget target = ReplayTarget.of(manager)) {
                return new Replayer(trace).replay(target);
            }
        }
    }

    private static int indexOfAlloc(AllocationTrace trace, int n) {
        for (int op = 0, seen = 0; op < trace.ops(); op++) {
            if (trace.kind(op) == AllocationTrace.ALLOC && seen++ == n) return op;
        }
        throw new AssertionError("fewer than " + (n + 1) + " allocs in " + List.of(trace.name()));
    }

    /** The host driver, whose device synchronisations return only once {@code deviceDone} opens. */
    private static VmmDriver heldSynchronisations(VmmDriver host, CountDownLatch deviceDone) {
        return new BeforeDeviceSyncDriver(host, () -> {
            try {
                deviceDone.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted while the device was busy");
            }
        });
    }
}
