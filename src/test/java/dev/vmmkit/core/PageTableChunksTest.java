package dev.vmmkit.core;

import dev.vmmkit.driver.DryDriver;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The page table's entries come in chunks made where pages are mapped: a region spanning twice a
 * large device costs nothing per page until it is used, handles that cross a chunk's edge read back
 * whole, and placements mapping neighbouring ranges of one new chunk at once lose no entry.
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
