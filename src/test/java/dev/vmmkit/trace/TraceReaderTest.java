package dev.vmmkit.trace;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class TraceReaderTest {

    private static final String SMALL = """
            # action,addr,size,stream  (hand-written)
            segment_alloc,1000000,2097152,0
            alloc,1000000,4096,0

            alloc,1004096,512,7
            free_requested,1000000,4096,0
            free_completed,1000000,4096,0
            # a comment between events
            alloc,1000000,1024,0
            segment_free,2000000,2097152,0
            free_completed,1004096,512,7
            """;

    @TempDir
    Path dir;

    @Test
    void keepsAllocsAndCompletedFreesInFileOrder() throws IOException {
        AllocationTrace trace = TestTraces.parse(SMALL);

        assertEquals("test.csv", trace.name());
        assertEquals(5, trace.ops());
        assertEquals(3, trace.allocs());
        assertEquals(2, trace.frees());
        byte[] kinds = {AllocationTrace.ALLOC, AllocationTrace.ALLOC, AllocationTrace.FREE,
                AllocationTrace.ALLOC, AllocationTrace.FREE};
        long[] keys = {1000000, 1004096, 1000000, 1000000, 1004096};
        long[] sizes = {4096, 512, 4096, 1024, 512};
        long[] streams = {0, 7, 0, 0, 7};
        int[] lines = {3, 5, 7, 9, 11};
        for (int op = 0; op < trace.ops(); op++) {
            assertEquals(kinds[op], trace.kind(op), "kind of op " + op);
            assertEquals(keys[op], trace.key(op), "key of op " + op);
            assertEquals(sizes[op], trace.size(op), "size of op " + op);
            assertEquals(streams[op], trace.stream(op), "stream of op " + op);
            assertEquals(lines[op], trace.lineNumber(op), "line of op " + op);
        }
    }

    @Test
    void computesPeakLiveBytesAndMostLiveAllocations() throws IOException {
        AllocationTrace trace = TestTraces.parse(SMALL);

        assertEquals(4096 + 512, trace.peakLiveBytes());
        assertEquals(2, trace.maxLiveAllocations());
    }

    @Test
    void aFreeCarriesTheSizeOfItsAlloc() throws IOException {
        AllocationTrace trace = TestTraces.parse("alloc,1,4096,0\nfree_completed,1,0,0\n");

        assertEquals(4096, trace.size(1));
    }

    @Test
    void readsGzipByMagicBytesWhateverTheName() throws IOException {
        Path gzippedAsCsv = dir.resolve("looks-plain.csv");
        Files.write(gzippedAsCsv, TestTraces.gzip(SMALL));
        Path plainAsGz = dir.resolve("looks-gzipped.csv.gz");
        Files.writeString(plainAsGz, SMALL);

        AllocationTrace fromGzip = TraceReader.read(gzippedAsCsv);
        AllocationTrace fromPlain = TraceReader.read(plainAsGz);

        assertEquals("looks-plain.csv", fromGzip.name());
        assertEquals(5, fromGzip.ops());
        assertEquals(5, fromPlain.ops());
        assertEquals(fromPlain.peakLiveBytes(), fromGzip.peakLiveBytes());
    }

    @Test
    void acceptsABareHeaderLineCarriageReturnsAndAnEmptyFile() throws IOException {
        assertEquals(2, TestTraces.parse("action,addr,size,stream\r\nalloc,1,512,0\r\nfree_completed,1,512,0\r\n").ops());
        assertEquals(0, TestTraces.parse("").ops());
        assertEquals(0, TestTraces.parse("# only a comment\n").ops());
    }

    @Test
    void readsAddressesAboveTheSignedRange() throws IOException {
        AllocationTrace trace = TestTraces.parse("alloc,18446744073709551615,512,18446744073709551614\n");

        assertEquals(-1L, trace.key(0));
        assertEquals(-2L, trace.stream(0));
    }

    @Test
    void freesOfAllocationsMadeBeforeTheTraceBeganStartIt() throws IOException {
        // Recording began after keys 7 and 8 were allocated: the trace frees them without an alloc.
        AllocationTrace trace = TestTraces.parse("""
                alloc,1,100,0
                free_completed,7,4096,3
                alloc,7,50,0
                free_completed,1,100,0
                free_completed,8,1000,0
                free_completed,7,50,0
                """);

        assertEquals(2, trace.allocationsBeforeTrace());
        assertEquals(8, trace.ops(), "two allocations first, then the six lines");
        assertEquals(List.of(AllocationTrace.ALLOC, AllocationTrace.ALLOC, AllocationTrace.ALLOC), List.of(
                trace.kind(0), trace.kind(1), trace.kind(2)));
        assertEquals(List.of(7L, 8L, 1L), List.of(trace.key(0), trace.key(1), trace.key(2)));
        assertEquals(List.of(4096L, 1000L), List.of(trace.size(0), trace.size(1)), "sizes from the frees");
        assertEquals(3L, trace.stream(0), "stream from the free");
        assertEquals(List.of(0, 0, 1), List.of(trace.lineNumber(0), trace.lineNumber(1), trace.lineNumber(2)));
        assertEquals(4096 + 1000 + 100, trace.peakLiveBytes(), "live from the start");
        assertEquals(3, trace.maxLiveAllocations());
    }

    @Test
    void aTraceThatBeginsWithTheProgramHasNoAllocationsBeforeIt() throws IOException {
        assertEquals(0, TestTraces.parse("alloc,1,100,0\nfree_completed,1,100,0\n").allocationsBeforeTrace());
    }

    @ParameterizedTest(name = "{2}")
    @CsvSource(delimiter = '|', quoteCharacter = '"', textBlock = """
            alloc,1,512                          | 2 | expected 4 fields (action,addr,size,stream), found 3
            alloc,1,512,0,9                      | 2 | expected 4 fields (action,addr,size,stream), found 5
            alloc,0xg0,512,0                     | 2 | addr '0xg0' is not a non-negative number (decimal, or hexadecimal with 0x)
            alloc,0x,512,0                       | 2 | addr '0x' is not a non-negative number (decimal, or hexadecimal with 0x)
            alloc,0x10000000000000000,512,0      | 2 | addr 0x10000000000000000 is out of range (at most 2^64-1)
            alloc,-16,512,0                      | 2 | addr '-16' is not a non-negative number (decimal, or hexadecimal with 0x)
            alloc,1,big,0                        | 2 | size 'big' is not a decimal number
            alloc,1,,0                           | 2 | size '' is not a decimal number
            alloc,1,512,s                        | 2 | stream 's' is not a non-negative number (decimal, or hexadecimal with 0x)
            alloc,1,-512,0                       | 2 | negative size -512
            malloc,1,512,0                       | 2 | unknown action 'malloc' (expected alloc, free_requested, free_completed, wait_gave_up or segment_*)
            free_completed,5,512,0\\nfree_completed,5,512,0 | 3 | free of key 5, which is already freed (a second free without an alloc between)
            free_completed,99,512,0\\nfree_completed,99,512,0 | 3 | free of key 99, which is already freed (a second free without an alloc between)
            alloc,5,1024,0                       | 2 | alloc of key 5, which is already live
            """)
    void aMalformedLineNamesFileLineAndProblem(String badLines, int badLine, String problem) {
        // Line 1 allocates key 5 and stays live, so the bad lines can refer to it.
        String text = "alloc,5,512,0\n" + badLines.replace("\\n", "\n") + "\nalloc,6,512,0\n";

        TraceFormatException e = assertThrows(TraceFormatException.class, () -> TestTraces.parse(text));

        assertEquals("test.csv:" + badLine + ": " + problem, e.getMessage());
        assertEquals(badLine, e.lineNumber());
        assertEquals("test.csv", e.source());
        assertEquals(problem, e.problem());
    }

    @Test
    void aSpacedHeaderAndWindowsLineEndingsAreAccepted() throws IOException {
        AllocationTrace trace = TestTraces.parse("action, addr, size, stream\r\nalloc,1,4096,0\r\nfree_completed,1,4096,0\r\n");

        assertEquals(2, trace.ops());
        assertEquals(4096, trace.peakLiveBytes());
        assertEquals(2, trace.lineNumber(0), "the header is line 1");
    }

    @Test
    void hexadecimalAddressesAndStreamsAreKeysLikeDecimalOnes() throws IOException {
        AllocationTrace trace = TestTraces.parse("alloc,0x7f3e93c00000,4096,0x55d0\nalloc,16,512,0\nfree_completed,0X7F3E93C00000,4096,0x55d0\n");

        assertEquals(3, trace.ops());
        assertEquals(0x7f3e93c00000L, trace.key(0));
        assertEquals(0x55d0, trace.stream(0));
        assertEquals(AllocationTrace.FREE, trace.kind(2));
        assertEquals(trace.key(0), trace.key(2), "the free pairs with the alloc, whatever the case of its digits");
    }

    @Test
    void ignoredActionsMustStillBeWellFormed() {
        TraceFormatException e = assertThrows(TraceFormatException.class,
                () -> TestTraces.parse("# header\nsegment_alloc,1,two,0\n"));

        assertEquals("test.csv:2: size 'two' is not a decimal number", e.getMessage());
    }

    @Test
    void aMalformedLineInAGzippedFileNamesTheFile() throws IOException {
        Path file = dir.resolve("bad.csv.gz");
        Files.write(file, TestTraces.gzip("alloc,1,512,0\nalloc,1,512,0\n"));

        TraceFormatException e = assertThrows(TraceFormatException.class, () -> TraceReader.read(file));

        assertEquals("bad.csv.gz:2: alloc of key 1, which is already live", e.getMessage());
    }

    @Test
    void readsTheRealBertTrace() throws IOException {
        AllocationTrace trace = TraceReader.read(TestTraces.shipped("bert_infer.csv.gz"));

        assertEquals(TestTraces.BERT_ALLOCS, trace.allocs());
        assertEquals(TestTraces.BERT_FREES, trace.frees());
        assertEquals(TestTraces.BERT_ALLOCS + TestTraces.BERT_FREES, trace.ops());
        assertEquals(TestTraces.BERT_PEAK_LIVE_BYTES, trace.peakLiveBytes());
        assertTrue(trace.maxLiveAllocations() > 0 && trace.maxLiveAllocations() < trace.allocs());
        assertEquals(93_763_584, trace.size(0), "first alloc, line 3");
        assertEquals(3, trace.lineNumber(0));
    }

    @Test
    void readingAMissingFileIsAnIOException() {
        assertThrows(IOException.class, () -> TraceReader.read(dir.resolve("absent.csv")));
    }
}
