package dev.vmmkit.core;

import dev.vmmkit.driver.DriverException;

import java.util.function.ToIntFunction;

import static dev.vmmkit.core.StreamWaitList.NO_PENDING_WORK;

/**
 * Takes whole handles back out of one {@link RegionHeap}'s free blocks: for a placement at the
 * budget (they move under the new request), to trim physical memory back to the budget, and to
 * release everything cached (out-of-memory recovery, an explicit drain). {@link ReclaimPlanner}
 * says which handles; this class does it: the blocks are taken out under the lock, unmapped
 * without it, and become unmapped space under it again.
 *
 * <p>Called without the region's lock.
 */
final class FreeHandleReclaimer {
    private final RegionHeap region;
    private final BlockTable blocks;
    private final StreamFreeLists freeLists;
    private final ReclaimPlanner planner;

    FreeHandleReclaimer(RegionHeap region) {
        this.region = region;
        this.blocks = region.blocks;
        this.freeLists = region.freeLists;
        this.planner = new ReclaimPlanner(blocks, freeLists, region.pages);
    }

    /**
     * Unmaps whole handles of up to {@code wantedBytes} lying inside FREE blocks with no pending
     * work, as {@link ReclaimPlanner} picks them, and adds them to {@code out}. A block whose unmap
     * fails stays FREE and mapped.
     */
    void reclaimFreeHandles(long wantedBytes, HandleRun out, boolean promoteFirst) {
        detachAndUnmap(promoteFirst, pieces -> planner.detachReclaimable(wantedBytes, pieces), out);
    }

    /**
     * Unmaps and releases every whole free handle larger than {@code minBytes} (the first of each
     * free block: {@link OversizedFreeHandles}), after promoting completed frees.
     */
    void releaseHandlesOver(long minBytes) {
        HandleRun freed = new HandleRun();
        detachAndUnmap(true, pieces -> planner.detachHandlesOver(minBytes, pieces), freed);
        release(freed);
    }

    /**
     * Under the lock, promotes completed frees when {@code promoteFirst} and lets {@code plan} detach
     * blocks of no-pending-work free memory into a scratch array (returning how many); then unmaps
     * them into {@code out} without it.
     */
    private void detachAndUnmap(boolean promoteFirst, ToIntFunction<int[]> plan, HandleRun out) {
        int[] pieces;
        int n;
        region.lock.lock();
        try {
            if (promoteFirst) freeLists.promoteCompleted();
            pieces = new int[freeLists.noPendingWork().size()];
            n = plan.applyAsInt(pieces);
            if (n > 0) region.inFlight.begin();
        } finally {
            region.lock.unlock();
        }
        unmapDetached(pieces, n, out);
    }

    private void release(HandleRun freed) {
        for (int i = 0; i < freed.count(); i++) region.handles.release(freed.handle(i), freed.bytes(i));
    }

    /**
     * Unmaps the {@code n} detached IN_FLIGHT blocks in {@code pieces} into {@code out}, without the
     * lock, then makes each unmapped space again, or FREE and mapped where its unmap failed; ends
     * the in-flight work its caller began (when {@code n > 0}).
     */
    private void unmapDetached(int[] pieces, int n, HandleRun out) {
        if (n == 0) return;
        boolean[] unmappedOk = new boolean[n];
        for (int i = 0; i < n; i++) {
            long from = blocks.address[pieces[i]];
            long to = from + blocks.size[pieces[i]];
            try {
                region.pages.unmapRange(from, to, out);
                unmappedOk[i] = true;
            } catch (DriverException e) {
                // still mapped: the block goes back as it was
            }
        }
        region.lock.lock();
        try {
            for (int i = 0; i < n; i++) {
                if (unmappedOk[i]) {
                    region.restoreUnmapped(pieces[i]);
                } else {
                    blocks.requestedOrStream[pieces[i]] = NO_PENDING_WORK;
                    region.reattachFree(pieces[i]);
                }
            }
            region.inFlight.end();
        } finally {
            region.lock.unlock();
        }
    }

    /**
     * Gives back free handles while physical memory is over the budget. It gets there only when
     * moving pages fell short (free pages were stranded in partly live handles) and new ones were
     * made; trimming at the next miss keeps such overshoots from adding up, so the peak of physical
     * memory stays within one overshoot of the budget ({@link PhysicalBudget#trimMargin}: a little
     * below it, where a page is a large share of the peak).
     */
    void trimToBudget(long requested) {
        long excess = region.budget.excess(requested);
        if (excess <= 0) return;
        excess += region.budget.trimMargin(requested);
        HandleRun freed = new HandleRun();
        reclaimFreeHandles(excess, freed, true);
        release(freed);
    }

    /**
     * Releases cached physical memory: first waits for pending frees when {@code waitForStreams}
     * (else promotes those already complete), then unmaps and releases every whole free handle,
     * and drains the pool.
     */
    void releaseCachedMemory(boolean waitForStreams) {
        if (waitForStreams) {
            region.waitForPendingFrees(-1);
        } else {
            region.lock.lock();
            try {
                freeLists.promoteCompleted();
            } finally {
                region.lock.unlock();
            }
        }
        region.lock.lock();
        try {
            region.aliases.unmapRetiredAliases();
        } finally {
            region.lock.unlock();
        }
        HandleRun freed = new HandleRun();
        reclaimFreeHandles(Long.MAX_VALUE, freed, false);
        release(freed);
        region.handles.drainPool();
    }
}
