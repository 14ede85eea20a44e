package dev.vmmkit.trace;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.GZIPInputStream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class TraceWriterTest {

    @TempDir
    Path dir;

    @Test
    void writesAHeaderAndPyTorchStyleLines() throws IOException {
        Path file = dir.resolve("run.csv");
        try (TraceWriter writer = TraceWriter.open(file, "pid 42")) {
            writer.alloc(0x7f00_0000_0000L, 4096, 0);
            writer.free(0x7f00_0000_0000L, 4096, 0);
        }

        assertEquals(List.of(
                "# action,addr,size,stream  (vmmkit trace, pid 42)",
                "alloc,139637976727552,4096,0",
                "free_requested,139637976727552,4096,0",
                "free_completed,139637976727552,4096,0"), Files.readAllLines(file));
    }

    @Test
    void roundTripsThroughTheReaderGzippedWhenNamedSo() throws IOException {
        Path file = dir.resolve("run.csv.gz");
        try (TraceWriter writer = TraceWriter.open(file, "")) {
            writer.alloc(1000, 512, 0);
            writer.alloc(-4096L, 1 << 20, -1L);   // addresses and streams above the signed range
            writer.free(1000, 512, 0);
            writer.alloc(1000, 2048, 3);
        }
        try (InputStream in = new GZIPInputStream(Files.newInputStream(file))) {
            assertTrue(new String(in.readAllBytes()).startsWith("# action,addr,size,stream  (vmmkit trace)\n"));
        }

        AllocationTrace trace = TraceReader.read(file);

        assertEquals(4, trace.ops());
        assertEquals(3, trace.allocs());
        assertEquals(-4096L, trace.key(1));
        assertEquals(-1L, trace.stream(1));
        assertEquals(AllocationTrace.FREE, trace.kind(2));
        assertEquals(1000, trace.key(2));
        assertEquals(2048, trace.size(3));
        assertEquals(3, trace.stream(3));
        assertEquals((1 << 20) + 2048, trace.peakLiveBytes(), "after the free, 2048 replaces 512");
    }

    @Test
    void concurrentWritersNeverInterleaveLines() throws Exception {
        Path file = dir.resolve("threads.csv");
        int threads = 4;
        int eventsPerThread = 2_000;
        try (TraceWriter writer = TraceWriter.open(file, "threads")) {
            List<Thread> running = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                long base = (t + 1) * 1_000_000_000L;
                running.add(Thread.ofPlatform().start(() -> {
                    try {
                        for (int i = 0; i < eventsPerThread; i++) {
                            writer.alloc(base + i * 512L, 512, 0);
                            writer.free(base + i * 512L, 512, 0);
                        }
                    } catch (IOException e) {
                        throw new RuntimeException(e);
                    }
                }));
            }
            for (Thread thread : running) thread.join();
        }

        AllocationTrace trace = TraceReader.read(file);   // fails on any torn or unpaired line

        assertEquals(threads * eventsPerThread, trace.allocs());
        assertEquals(threads * eventsPerThread, trace.frees());
    }

    @Test
    void refusesToWriteAfterClose() throws IOException {
        TraceWriter writer = TraceWriter.open(dir.resolve("closed.csv"), "");
        writer.close();
        writer.close();   // closing twice is harmless

        assertThrows(IOException.class, () -> writer.alloc(1, 512, 0));
    }
}
