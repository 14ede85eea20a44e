package dev.vmmkit.trace;

import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.core.DeviceWideFreeClock;
import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A program's cudaFrees recorded through vmmkit's allocator on the host emulation, with the fence's
 * thread covering them as it does in a live run: each free's completion is written after it, before
 * the first request made once the device had finished, and every one is written by the end.
 */
class CudaFreeRecordingTest {
    private static final String DEVICE_WIDE = Long.toUnsignedString(DeviceMemoryResource.DEVICE_WIDE_STREAM);

    @TempDir
    Path dir;

    @Test
    void eachCudaFreeCompletesAfterItAndBeforeTheFirstRequestOnceItsMemoryIsBack() throws IOException {
        Path file = dir.resolve("program.csv");
        int frees = 0;
        try (HostDriver host = HostDriver.open();
             TraceFileRecorder recorder = new TraceFileRecorder(file, "test")) {
            VmmManager manager = new VmmManager(host, VmmConfig.from(Map.of()));
            RecordingResource program = new RecordingResource(manager, recorder);
            DeviceWideFreeClock clock = manager.deviceWideFreeClock();
            for (int i = 0; i < 200; i++) {
                long address = program.allocate((1 + i % 7) << 20, 0);
                program.deallocate(address, DeviceMemoryResource.DEVICE_WIDE_STREAM);
                frees++;
                if (i == 99) {
                    long mark = clock.markAfterFree(address);
                    while (!clock.covered(address, mark)) Thread.onSpinWait(); // the fence's thread synchronises
                    program.allocate(1 << 20, 0); // its line comes after the completion of every free so far
                }
            }
            program.close();
        }
        List<String> lines = Files.readAllLines(file).stream().filter(l -> !l.startsWith("#")).toList();

        int firstAllocAfterWait = indexOfNth(lines, "alloc,", 101);
        int completedBefore = (int) lines.subList(0, firstAllocAfterWait).stream()
                .filter(l -> l.startsWith("free_completed,")).count();
        assertEquals(100, completedBefore, "every free before the wait completed before the next request");
        AllocationTrace trace = TraceReader.read(file);
        assertEquals(frees, trace.frees());
        assertEquals(frees, trace.covers(), "every cudaFree completes by the end");
        assertTrue(lines.stream().filter(l -> l.startsWith("free_requested,")).allMatch(l -> l.endsWith("," + DEVICE_WIDE)));
    }

    @Test
    void threadsFreeingWithCudaFreeAtOnceLeaveATraceThatReadsWithEveryFreeCompleted() throws Exception {
        Path file = dir.resolve("threads.csv");
        int threads = 4;
        int pairs = 500;
        try (HostDriver host = HostDriver.open();
             TraceFileRecorder recorder = new TraceFileRecorder(file, "test")) {
            VmmManager manager = new VmmManager(host, VmmConfig.from(Map.of()));
            RecordingResource program = new RecordingResource(manager, recorder);
            java.util.concurrent.CyclicBarrier start = new java.util.concurrent.CyclicBarrier(threads);
            List<Thread> running = new java.util.ArrayList<>();
            java.util.Queue<Throwable> failures = new java.util.concurrent.ConcurrentLinkedQueue<>();
            for (int t = 0; t < threads; t++) {
                int seed = t;
                running.add(Thread.ofPlatform().start(() -> {
                    try {
                        start.await();
                        java.util.Random random = new java.util.Random(seed);
                        for (int i = 0; i < pairs; i++) {
                            long address = program.allocate((1 + random.nextInt(4)) << 20, 0);
                            program.deallocate(address, DeviceMemoryResource.DEVICE_WIDE_STREAM);
                        }
                    } catch (Throwable e) {
                        failures.add(e);
                    }
                }));
            }
            for (Thread t : running) t.join();
            assertTrue(failures.isEmpty(), () -> "a thread failed: " + failures.peek());
            program.close();
        }

        AllocationTrace trace = TraceReader.read(file);
        assertEquals(threads * pairs, trace.allocs());
        assertEquals(threads * pairs, trace.frees());
        assertEquals(threads * pairs, trace.covers(), "every cudaFree completes once");
    }

    private static int indexOfNth(List<String> lines, String prefix, int n) {
        for (int i = 0, seen = 0; i < lines.size(); i++) {
            if (lines.get(i).startsWith(prefix) && ++seen == n) return i;
        }
        throw new AssertionError("fewer than " + n + " lines start with " + prefix);
    }
}
