package dev.vmmkit.core;

import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.VmmDriver;

import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * The physical side of one region's reserved range, like PyTorch's ExpandableSegment: which handle
 * backs each page, and the driver calls that change it. A handle covers one or more whole pages
 * mapped at one address; for each page the table records the first page of that handle, and at
 * that page the handle and where it ends, so ranges are always unmapped, reclaimed and moved in
 * whole handles.
 *
 * <p>Bookkeeping equals driver state after every call, failures included: a page reads as mapped
 * exactly when the driver maps it.
 *
 * <p>Not locked: the region hands each caller a page range no other thread touches (a placement
 * or reclaim in flight), and reads the table only under its lock, which orders the writes. The
 * one exception is the bitmap of mapped pages, whose words neighbouring ranges share: it has a
 * monitor of its own ({@link SharedBitmap}).
 */
final class PageTable {
    private final VmmDriver driver;
    private final PeerAccess access;
    private final long base;
    private final long pageBytes;
    private final int pageShift;
    /**
     * The per-page entries, in chunks of {@value #CHUNK_PAGES} pages made when a page of theirs is
     * first mapped: a region reserves twice the device (143,000 pages on an H200), and three arrays
     * of that length took 1.5 ms to allocate and zero in the program's first call, per region
     * (docs/cold-path.md). Chunks are published by compare-and-set, as placements map disjoint
     * ranges of one chunk outside the region's lock; once made, a chunk stays.
     */
    private final AtomicReferenceArray<Chunk> chunks;
    /**
     * Per chunk, 1 + the first page of the handle mapped over the whole chunk; 0 when no one handle
     * covers it. A large mapping writes this one int per chunk and makes no chunk but the one of
     * its first page: a program's first 16 GiB allocation made and filled 16 chunks (128 KiB of
     * fresh heap) between its map and its setAccess, 136 us on an H200. Where it is set, the
     * chunk's own entries are 0 (the pages were unmapped before the handle was recorded here).
     */
    private final int[] wholeChunkStartPlusOne;
    static final int CHUNK_PAGES = 512;
    private static final int CHUNK_SHIFT = Integer.numberOfTrailingZeros(CHUNK_PAGES);

    /** The entries of {@value #CHUNK_PAGES} pages. */
    private static final class Chunk {
        /**
         * For each page, 1 + the index of the first page of the handle mapped there; 0 when unmapped
         * (and where {@link #wholeChunkStartPlusOne} speaks for the chunk). The only per-page entry
         * a mapping writes, 4 bytes a page, and only in the chunks it covers in part.
         */
        final int[] handleStartPlusOne = new int[CHUNK_PAGES];
        /** At a handle's first page: the handle mapped from there (other entries are stale). */
        final long[] handleByStartPage = new long[CHUNK_PAGES];
        /** At a handle's first page: the index of the page after its last (other entries are stale). */
        final int[] endPageByStartPage = new int[CHUNK_PAGES];
    }

    /**
     * The mapped pages, 64 to a word: a pause or a close finds the mapped runs of a range reserved
     * for the whole device without walking its pages one by one (often in the interpreter: a
     * program pauses a few times in its life). Shared safely: the writers of neighbouring page
     * ranges share words and take no common lock (a placement maps outside the region's lock).
     */
    private final SharedBitmap mappedPages;

    /** A table whose runs give access to the driver's own device alone. */
    PageTable(VmmDriver driver, long base, long span, long pageBytes) {
        this(driver, new PeerAccess(driver, () -> new RegionHeap[0]), base, span, pageBytes);
    }

    /** A table whose runs give access to the own device and the peers {@code access} names. */
    PageTable(VmmDriver driver, PeerAccess access, long base, long span, long pageBytes) {
        this.driver = driver;
        this.access = access;
        this.base = base;
        this.pageBytes = pageBytes;
        this.pageShift = Long.numberOfTrailingZeros(pageBytes);
        int pages = Math.toIntExact(span >>> pageShift);
        int chunkCount = (pages + CHUNK_PAGES - 1) >>> CHUNK_SHIFT;
        this.chunks = new AtomicReferenceArray<>(chunkCount);
        this.wholeChunkStartPlusOne = new int[chunkCount];
        this.mappedPages = new SharedBitmap(pages);
    }

    long pageBytes() {
        return pageBytes;
    }

    boolean isMapped(long va) {
        return startPlusOne(page(va)) != 0;
    }

    /** Where the handle mapped at {@code va} starts. */
    long handleStart(long va) {
        return address(startPage(page(va)));
    }

    /** Where the handle mapped at {@code va} ends. */
    long handleEnd(long va) {
        int start = startPage(page(va));
        return address(chunkOf(start).endPageByStartPage[slot(start)]);
    }

    /** How many chunks of entries exist (tests: a table allocates them only where pages were mapped). */
    int chunksMade() {
        int n = 0;
        for (int i = 0; i < chunks.length(); i++) if (chunks.getPlain(i) != null) n++;
        return n;
    }

    /**
     * The largest sub-range of {@code [from, to)} (both mapped) made of whole handles, as
     * {@code [start, end)} packed in {@code out}; {@code out[0] >= out[1]} when there is none.
     */
    void wholeHandlesWithin(long from, long to, long[] out) {
        long start = (from + pageBytes - 1) & -pageBytes;
        if (start < to && handleStart(start) != start) start = handleEnd(start);
        long end = to & -pageBytes;
        if (end > start && isMapped(end - 1) && handleEnd(end - 1) != end) end = handleStart(end - 1);
        out[0] = start;
        out[1] = Math.max(start, end);
    }

    /** The number of handles mapped in {@code [from, to)} (each counted once, however many pages it covers). */
    int handlesIn(long from, long to) {
        int n = 0;
        for (long va = from; va < to; ) {
            if (!isMapped(va)) {
                va += pageBytes;
                continue;
            }
            n++;
            va = handleEnd(va);
        }
        return n;
    }

    /**
     * Maps the handles of {@code run} back to back from {@code va}, then grants access to the whole
     * run in one call (the driver still charges per handle). If a call fails, every handle mapped
     * here is unmapped again and the failure is thrown; a handle whose unmap failed too stays
     * mapped and recorded ({@link #isMapped} tells the caller which).
     */
    void mapRun(long va, HandleRun run) {
        int mapped = 0;
        long at = va;
        try {
            for (; mapped < run.count(); mapped++) {
                driver.map(at, run.bytes(mapped), run.handle(mapped));
                record(at, run.bytes(mapped), run.handle(mapped));
                at += run.bytes(mapped);
            }
            // Not mapWithAccess: if granting access fails, the rollback below must know which unmap failed.
            // One call for the own device and every granted peer.
            if (at > va) access.openNewRun(va, at - va);
        } catch (RuntimeException e) {
            unmapFirst(va, run, mapped, e);
            throw e;
        }
    }

    /**
     * Grants access to {@code [va, va + size)}, mapped already: a run whose grant failed and whose
     * undoing unmap failed too stays mapped without access until this succeeds.
     */
    void grantAccess(long va, long size) {
        access.openNewRun(va, size);
    }

    /** Rollback: unmaps the first {@code count} handles of {@code run} mapped from {@code va}; a failure stays mapped and recorded. */
    private void unmapFirst(long va, HandleRun run, int count, RuntimeException cause) {
        for (int i = 0; i < count; i++) {
            try {
                driver.unmap(va, run.bytes(i));
                forget(va, run.bytes(i));
            } catch (DriverException stuck) {
                cause.addSuppressed(stuck);
            }
            va += run.bytes(i);
        }
    }

    /**
     * Unmaps {@code [from, to)}, which must begin and end on handle boundaries, in one driver call,
     * and adds its handles to {@code out} in address order. If the unmap fails, nothing changes
     * and the failure is thrown.
     */
    void unmapRange(long from, long to, HandleRun out) {
        driver.unmap(from, to - from);
        for (long va = from; va < to; ) {
            long end = handleEnd(va);
            out.add(handleAt(va), end - va);
            forget(va, end - va);
            va = end;
        }
    }

    /**
     * Maps the handles of {@code [from, from + length)} also at {@code to} (unmapped, handle
     * boundaries at both ends), grants access there, then unmaps them at {@code from}: the memory
     * and its bytes move to a new address without a copy. On failure the mapping at {@code to} is
     * undone and {@code from} is left as it was.
     */
    void moveMapping(long from, long to, long length) {
        HandleRun run = new HandleRun();
        for (long va = from; va < from + length; ) {
            long end = handleEnd(va);
            run.add(handleAt(va), end - va);
            va = end;
        }
        mapRun(to, run);
        try {
            driver.unmap(from, length);
        } catch (RuntimeException e) {
            unmapFirst(to, run, run.count(), e);
            throw e;
        }
        for (long va = from; va < from + length; ) {
            long end = handleEnd(va);
            forget(va, end - va);
            va = end;
        }
    }

    /** Adds the handles mapped in {@code [from, to)} (whole handles) to {@code out}, in address order, changing nothing. */
    void handlesOf(long from, long to, HandleRun out) {
        for (long va = from; va < to; ) {
            long end = handleEnd(va);
            out.add(handleAt(va), end - va);
            va = end;
        }
    }

    /** Receives handles that are no longer mapped. */
    @FunctionalInterface
    interface HandleSink {
        void accept(long handle, long bytes);
    }

    /**
     * Unmaps every handle, one call each, and passes each unmapped handle to {@code released}.
     * A handle whose unmap fails is forgotten anyway (closing: the driver reclaims it at exit).
     */
    void unmapAll(HandleSink released) {
        for (int p = mappedPages.nextSetBit(0); p >= 0; p = mappedPages.nextSetBit(p)) {
            long va = address(p);
            long h = handleAt(va);
            long end = handleEnd(va);
            try {
                driver.unmap(va, end - va);
                released.accept(h, end - va);
            } catch (DriverException ignored) {
                // Closing anyway; the driver reclaims what is left when the process ends.
            }
            forget(va, end - va);
            p = page(end - 1) + 1;
        }
    }

    /** Calls {@code visitor} once per run of contiguously mapped pages (whole handles), in address order. */
    void forEachMappedRun(RegionHeap.RunVisitor visitor) {
        for (int first = mappedPages.nextSetBit(0); first >= 0; ) {
            int end = mappedPages.nextClearBit(first);
            visitor.visit(address(first), (long) (end - first) << pageShift);
            first = mappedPages.nextSetBit(end);
        }
    }

    /** The handle mapped at {@code va} (a mapped address). */
    long handleAt(long va) {
        int start = startPage(page(va));
        return chunkOf(start).handleByStartPage[slot(start)];
    }

    /** The first page of the handle mapped at {@code page} (a mapped page). */
    private int startPage(int page) {
        return startPlusOne(page) - 1;
    }

    /** 1 + the first page of the handle mapped at {@code page}; 0 when the page is unmapped. */
    private int startPlusOne(int page) {
        int index = page >>> CHUNK_SHIFT;
        int whole = wholeChunkStartPlusOne[index];
        if (whole != 0) return whole;
        Chunk chunk = chunks.getPlain(index);
        return chunk == null ? 0 : chunk.handleStartPlusOne[slot(page)];
    }

    /** The chunk of {@code page}, which holds a mapped page (so it exists). */
    private Chunk chunkOf(int page) {
        return chunks.getPlain(page >>> CHUNK_SHIFT);
    }

    /** The chunk of {@code page}, made if none is yet (another thread's may win the race: either is the one). */
    private Chunk chunkToWrite(int page) {
        int index = page >>> CHUNK_SHIFT;
        Chunk chunk = chunks.getAcquire(index);
        if (chunk != null) return chunk;
        Chunk made = new Chunk();
        Chunk won = chunks.compareAndExchangeRelease(index, null, made);
        return won == null ? made : won;
    }

    private void record(long va, long bytes, long handle) {
        int first = page(va);
        int end = page(va + bytes - 1) + 1;
        fillStarts(first, end, first + 1);
        Chunk head = chunkToWrite(first); // the first page's chunk may be one the handle covers whole
        head.handleByStartPage[slot(first)] = handle;
        head.endPageByStartPage[slot(first)] = end;
        mappedPages.set(first, end);
    }

    private void forget(long va, long bytes) {
        int first = page(va);
        int end = page(va + bytes - 1) + 1;
        fillStarts(first, end, 0);
        mappedPages.clear(first, end);
    }

    // A chunk the range covers whole takes one entry of its own (wholeChunkStartPlusOne); the
    // range's partial chunks at either end, Arrays.fill each, not a loop per page.
    private void fillStarts(int first, int end, int value) {
        for (int page = first; page < end; ) {
            int chunkStart = page & -CHUNK_PAGES;
            int upTo = Math.min(end, chunkStart + CHUNK_PAGES);
            if (page == chunkStart && upTo == chunkStart + CHUNK_PAGES) {
                wholeChunkStartPlusOne[page >>> CHUNK_SHIFT] = value;
            } else {
                java.util.Arrays.fill(chunkToWrite(page).handleStartPlusOne, page - chunkStart, upTo - chunkStart, value);
            }
            page = upTo;
        }
    }

    /** Where {@code page}'s entries lie in its chunk. */
    private static int slot(int page) {
        return page & (CHUNK_PAGES - 1);
    }

    private int page(long va) {
        return (int) ((va - base) >>> pageShift);
    }

    private long address(int page) {
        return base + ((long) page << pageShift);
    }
}
