package dev.vmmkit.core;

import dev.vmmkit.driver.DryDriver;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CountDownLatch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The page table's entries come in chunks made where pages are mapped: a region spanning twice a
 * large device costs nothing per page until it is used, a handle covering whole chunks makes only
 * the chunk of its first page, handles that cross a chunk's edge read back whole, and placements
 * mapping neighbouring ranges of one new chunk at once lose no entry.
 */
class PageTableChunksTest {
    private static final long PAGE = 2L << 20;
    private static final int CHUNK = PageTable.CHUNK_PAGES;

    private final DryDriver driver = new DryDriver(PAGE, 1L << 40);

    private PageTable tableOf(long pages, long[] baseOut) {
        long span = pages * PAGE;
        baseOut[0] = driver.reserve(span, PAGE);
        return new PageTable(driver, baseOut[0], span, PAGE);
    }

    private HandleRun oneHandle(long pages) {
        HandleRun run = new HandleRun();
        run.add(driver.create(pages * PAGE, false), pages * PAGE);
        return run;
    }

    @Test
    void aTableSpanningAnH200sTwiceMakesNoChunkUntilAPageIsMapped() {
        long[] base = new long[1];
        PageTable table = tableOf(2L * 141 * 512, base); // 282 GiB of 2 MiB pages
        assertEquals(0, table.chunksMade());
        assertFalse(table.isMapped(base[0] + 1000 * PAGE), "a page in a chunk never made reads unmapped");
        table.mapRun(base[0] + 3L * CHUNK * PAGE, oneHandle(1));
        assertEquals(1, table.chunksMade());
    }

    @Test
    void aHandleOfManyChunksMakesOnlyTheChunkItStartsIn() {
        long[] base = new long[1];
        PageTable table = tableOf(40L * CHUNK, base);
        long from = base[0] + (CHUNK - 16) * PAGE; // 16 pages into chunk 0, then 15 whole chunks, then 16 pages
        HandleRun run = oneHandle(16L * CHUNK);
        table.mapRun(from, run);
        assertEquals(2, table.chunksMade(), "the two chunks it covers in part, none of the 15 it covers whole");
        long end = from + 16L * CHUNK * PAGE;
        for (long va = from; va < end; va += 61 * PAGE) {
            assertTrue(table.isMapped(va));
            assertEquals(from, table.handleStart(va));
            assertEquals(end, table.handleEnd(va));
        }
        HandleRun out = new HandleRun();
        table.unmapRange(from, end, out);
        assertEquals(run.handle(0), out.handle(0));
        for (long va = from; va < end; va += 61 * PAGE) assertFalse(table.isMapped(va));
        table.mapRun(base[0] + 5L * CHUNK * PAGE + 7 * PAGE, oneHandle(3)); // a small handle inside a chunk a large one covered
        assertEquals(1, table.handlesIn(base[0], base[0] + 40L * CHUNK * PAGE));

        long aligned = base[0] + 20L * CHUNK * PAGE; // starts a chunk, covers it and the next whole
        HandleRun two = oneHandle(2L * CHUNK);
        table.mapRun(aligned, two);
        assertEquals(two.handle(0), table.handleAt(aligned + CHUNK * PAGE + 5 * PAGE));
        assertEquals(aligned + 2L * CHUNK * PAGE, table.handleEnd(aligned));
    }

    /**
     * Random maps, unmaps and moves of handles of 1 to 3 chunks' worth of pages, against a plain
     * array of who maps each page: every page reads back as the model says after every step.
     */
    @Test
    void randomMappingsReadBackAsAPerPageModelSays() {
        Random random = new Random(20261129);
        int pages = 12 * CHUNK;
        for (int round = 0; round < 10; round++) {
            long[] base = new long[1];
            PageTable table = tableOf(pages, base);
            int[] startOf = new int[pages]; // 1 + the first page of the handle mapped there; 0 unmapped
            int[] endOf = new int[pages];   // at a handle's first page: the page after its last
            long[] handleOf = new long[pages];
            for (int step = 0; step < 200; step++) {
                int at = random.nextInt(3) == 0 ? random.nextInt(pages / CHUNK) * CHUNK : random.nextInt(pages);
                if (startOf[at] != 0) {
                    int start = startOf[at] - 1;
                    int end = endOf[start];
                    int length = end - start;
                    int to = random.nextInt(pages - length + 1);
                    if (random.nextBoolean() && free(startOf, to, to + length)) {
                        table.moveMapping(base[0] + start * PAGE, base[0] + to * PAGE, length * PAGE);
                        long handle = handleOf[start];
                        java.util.Arrays.fill(startOf, start, end, 0);
                        java.util.Arrays.fill(startOf, to, to + length, to + 1);
                        endOf[to] = to + length;
                        handleOf[to] = handle;
                    } else {
                        HandleRun out = new HandleRun();
                        table.unmapRange(base[0] + start * PAGE, base[0] + end * PAGE, out);
                        assertEquals(handleOf[start], out.handle(0));
                        java.util.Arrays.fill(startOf, start, end, 0);
                    }
                } else {
                    int length = 1 + (random.nextInt(4) == 0 ? random.nextInt(3 * CHUNK) : random.nextInt(8));
                    if (at + length > pages || !free(startOf, at, at + length)) continue;
                    HandleRun run = oneHandle(length);
                    table.mapRun(base[0] + at * PAGE, run);
                    java.util.Arrays.fill(startOf, at, at + length, at + 1);
                    endOf[at] = at + length;
                    handleOf[at] = run.handle(0);
                }
                for (int page = 0; page < pages; page++) {
                    long va = base[0] + page * PAGE;
                    assertEquals(startOf[page] != 0, table.isMapped(va), "round " + round + " step " + step + " page " + page);
                    if (startOf[page] == 0) continue;
                    int start = startOf[page] - 1;
                    assertEquals(base[0] + start * PAGE, table.handleStart(va));
                    assertEquals(base[0] + endOf[start] * PAGE, table.handleEnd(va));
                    assertEquals(handleOf[start], table.handleAt(va));
                }
            }
        }
    }

    private static boolean free(int[] startOf, int from, int to) {
        for (int page = from; page < to; page++) if (startOf[page] != 0) return false;
        return true;
    }

    @Test
    void aHandleAcrossAChunkEdgeReadsBackWholeFromBothSidesAndIsForgottenWhole() {
        long[] base = new long[1];
        PageTable table = tableOf(4L * CHUNK, base);
        long from = base[0] + (CHUNK - 3) * PAGE; // 3 pages in the first chunk, 5 in the second
        HandleRun run = oneHandle(8);
        table.mapRun(from, run);
        assertEquals(2, table.chunksMade());
        for (long va = from; va < from + 8 * PAGE; va += PAGE) {
            assertTrue(table.isMapped(va));
            assertEquals(from, table.handleStart(va));
            assertEquals(from + 8 * PAGE, table.handleEnd(va));
            assertEquals(run.handle(0), table.handleAt(va));
        }
        assertFalse(table.isMapped(from - PAGE));
        assertFalse(table.isMapped(from + 8 * PAGE));
        HandleRun out = new HandleRun();
        table.unmapRange(from, from + 8 * PAGE, out);
        assertEquals(1, out.count());
        assertEquals(run.handle(0), out.handle(0));
        for (long va = from; va < from + 8 * PAGE; va += PAGE) assertFalse(table.isMapped(va));
        assertEquals(0, table.handlesIn(base[0], base[0] + 4L * CHUNK * PAGE));
    }

    @Test
    void placementsMappingNeighboursInOneNewChunkAtOnceLoseNoEntry() throws Exception {
        int threads = 8;
        int perThread = CHUNK / threads; // every thread writes its own pages of the same two chunks
        for (int round = 0; round < 20; round++) {
            long[] base = new long[1];
            PageTable table = tableOf(2L * CHUNK, base);
            CountDownLatch start = new CountDownLatch(1);
            List<Thread> workers = new ArrayList<>();
            long[][] handles = new long[threads][perThread];
            for (int t = 0; t < threads; t++) {
                int id = t;
                workers.add(Thread.ofPlatform().start(() -> {
                    try {
                        start.await();
                    } catch (InterruptedException e) {
                        throw new IllegalStateException(e);
                    }
                    for (int i = 0; i < perThread; i++) { // pages t, t + threads, ...: neighbours interleave
                        HandleRun run = oneHandle(1);
                        handles[id][i] = run.handle(0);
                        table.mapRun(base[0] + ((long) i * threads + id) * PAGE * 2, run);
                    }
                }));
            }
            start.countDown();
            for (Thread w : workers) w.join();
            for (int t = 0; t < threads; t++) {
                for (int i = 0; i < perThread; i++) {
                    long va = base[0] + ((long) i * threads + t) * PAGE * 2;
                    assertTrue(table.isMapped(va), "round " + round + ": page of thread " + t + " lost");
                    assertEquals(handles[t][i], table.handleAt(va));
                }
            }
            assertEquals(threads * perThread, table.handlesIn(base[0], base[0] + 2L * CHUNK * PAGE));
        }
    }
}
