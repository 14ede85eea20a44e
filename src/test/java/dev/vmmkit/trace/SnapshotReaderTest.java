package dev.vmmkit.trace;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.OptionalInt;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * PyTorch memory snapshots, read as the pickle {@code torch.cuda.memory._dump_snapshot} writes. The
 * snapshots in {@code src/test/resources/snapshots/} come from {@code scripts/synthetic-snapshot.py},
 * which simulates a caching allocator and wrote, next to each, the figures it kept while running
 * (reserved and live bytes after every entry): the expectations here come from there, not from the reader.
 */
class SnapshotReaderTest {
    private static final Path DIR = Path.of("src", "test", "resources", "snapshots");

    @TempDir
    Path dir;

    @ParameterizedTest
    @ValueSource(strings = {"whole.pickle", "truncated-expandable.pickle.gz", "two-devices.pickle.gz"})
    void findsTheRecordedPeaksOfEveryDevice(String name) throws IOException {
        JsonNode expected = expected(name);

        List<AllocationTrace> traces = TraceFiles.read(DIR.resolve(name), OptionalInt.empty());

        assertEquals(expected.size(), traces.size(), "one trace per device");
        for (int d = 0; d < traces.size(); d++) {
            AllocationTrace trace = traces.get(d);
            JsonNode figures = expected.get(d);
            RecordedMemory recorded = trace.recorded().orElseThrow();
            assertEquals(figures.get("reserved_peak_bytes").asLong(), recorded.reservedPeakBytes(), name + " device " + d);
            assertEquals(figures.get("live_peak_bytes").asLong(), recorded.livePeakBytes(), name + " device " + d);
            assertEquals(figures.get("live_peak_bytes").asLong(), trace.peakLiveBytes());
            assertEquals(figures.get("allocations_before_trace").asInt(), trace.allocationsBeforeTrace());
            assertEquals(trace.ops(), recorded.reservedAtOp().length);
            assertEquals(figures.get("reserved_peak_bytes").asLong(), Arrays.stream(recorded.reservedAtOp()).max().orElse(0)
                    + 0, "some request ran at the reserved peak (the simulator allocates right after it grows)");
        }
    }

    @Test
    void severalDevicesAreNamedAndOneCanBeChosen() throws IOException {
        List<AllocationTrace> both = TraceFiles.read(DIR.resolve("two-devices.pickle.gz"), OptionalInt.empty());
        List<AllocationTrace> second = TraceFiles.read(DIR.resolve("two-devices.pickle.gz"), OptionalInt.of(1));

        assertEquals(List.of("two-devices.pickle.gz device 0", "two-devices.pickle.gz device 1"),
                both.stream().map(AllocationTrace::name).toList());
        assertEquals(1, second.size());
        assertEquals(both.get(1).ops(), second.get(0).ops());
        assertEquals(both.get(1).recorded().orElseThrow().reservedPeakBytes(),
                second.get(0).recorded().orElseThrow().reservedPeakBytes());
        IOException e = assertThrows(IOException.class,
                () -> TraceFiles.read(DIR.resolve("two-devices.pickle.gz"), OptionalInt.of(2)));
        assertEquals("two-devices.pickle.gz: no device 2 in the snapshot (it has 2 devices, 0 to 1)", e.getMessage());
    }

    @Test
    void aTruncatedTraceStartsWithTheAllocationsMadeBeforeIt() throws IOException {
        AllocationTrace trace = TraceFiles.read(DIR.resolve("truncated-expandable.pickle.gz"), OptionalInt.empty()).get(0);
        int before = trace.allocationsBeforeTrace();

        for (int op = 0; op < before; op++) {
            assertEquals(AllocationTrace.ALLOC, trace.kind(op));
            assertEquals(0, trace.lineNumber(op), "made before the first entry");
        }
        assertTrue(trace.lineNumber(before) > 0);
    }

    @Test
    void aPickleThatIsNoSnapshotIsNamed() throws Exception {
        Path file = dir.resolve("other.pickle");
        python("import pickle; pickle.dump({'weights': [1, 2, 3]}, open('" + file + "', 'wb'))");

        IOException e = assertThrows(IOException.class, () -> TraceFiles.read(file, OptionalInt.empty()));

        assertEquals("other.pickle: a pickle, but not a PyTorch memory snapshot (no 'device_traces'; "
                + "write one with torch.cuda.memory._dump_snapshot)", e.getMessage());
    }

    @Test
    void aSnapshotCutShortIsAnErrorNamingTheFile() throws IOException {
        byte[] whole = Files.readAllBytes(DIR.resolve("whole.pickle"));
        Path file = dir.resolve("cut.pickle");
        Files.write(file, Arrays.copyOf(whole, whole.length / 2));

        IOException e = assertThrows(IOException.class, () -> TraceFiles.read(file, OptionalInt.empty()));

        assertTrue(e.getMessage().startsWith("cut.pickle: not a readable PyTorch memory snapshot ("), e.getMessage());
    }

    /**
     * Damage that reaches the pickle library's own code (a stack run empty, a negative or absurd
     * length, a list that holds itself used as a key, so hashing it never ends) is said as the file's
     * fault, naming the file, like a cut: a fuzz of the shipped snapshots found the empty stack, the
     * negative length and the endless hashing escaping as the library's IndexOutOfBoundsException,
     * NegativeArraySizeException and StackOverflowError.
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {
            "stack run empty:80 02 61 2e",
            "negative length:80 02 58 ff ff ff ff 2e",
            "absurd length:80 04 8e 00 00 00 00 00 00 00 40 2e",
            "self-holding key:80 02 5d 71 00 68 00 61 7d 68 00 4b 01 73 2e"})
    void aDamagedPickleIsAnErrorNamingTheFile(String damage) throws IOException {
        String[] hex = damage.substring(damage.indexOf(':') + 1).split(" ");
        byte[] bytes = new byte[hex.length];
        for (int i = 0; i < hex.length; i++) bytes[i] = (byte) Integer.parseInt(hex[i], 16);
        Path file = dir.resolve("damaged.pickle");
        Files.write(file, bytes);

        IOException e = assertThrows(IOException.class, () -> TraceFiles.read(file, OptionalInt.empty()));

        assertTrue(e.getMessage().startsWith("damaged.pickle: not a readable PyTorch memory snapshot ("), e.getMessage());
    }

    @Test
    void csvTracesAreStillRead() throws IOException {
        List<AllocationTrace> traces = TraceFiles.read(TestTraces.shipped("bert_infer.csv.gz"), OptionalInt.of(3));

        assertEquals(1, traces.size());
        assertEquals(TestTraces.BERT_PEAK_LIVE_BYTES, traces.get(0).peakLiveBytes());
        assertFalse(traces.get(0).recorded().isPresent());
    }

    private static JsonNode expected(String snapshot) throws IOException {
        String base = snapshot.replaceFirst("\\.pickle(\\.gz)?$", "");
        return new ObjectMapper().readTree(DIR.resolve(base + ".json").toFile());
    }

    private static void python(String code) throws Exception {
        Process p = new ProcessBuilder("python3", "-c", code).redirectErrorStream(true).start();
        try (InputStream out = p.getInputStream()) {
            String text = new String(out.readAllBytes());
            assertEquals(0, p.waitFor(), text);
        }
    }
}
