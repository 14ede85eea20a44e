package dev.vmmkit.core;

import dev.vmmkit.driver.DriverException;

import static dev.vmmkit.core.BlockTable.NONE;

/**
 * A request one {@link RegionHeap}'s cache missed: trim back to the budget, wait for pending
 * frees when new pages would pass it, place the request on unmapped space and map the pages
 * it needs ({@link PlacementChooser} says where, {@link HandleSupply} gives the handles,
 * {@link PageTable} maps them), and recover from out-of-memory by draining every cache once.
 *
 * <p>Runs without the region's lock; it takes the lock to pick and to finish a placement, and calls
 * the driver between.
 */
final class SlowPath {
    /** The longest a request that would pass the budget waits for frees made on streams (their events). */
    static final long STREAM_FREE_WAIT_NANOS = 1_000_000;
    /**
     * The same when cudaFree's frees are among them. A live program's thread runs ahead of the
     * device, and a cudaFree's block waits for a synchronisation that ends only when the device
     * catches up (tens of milliseconds in a training step); a 1 ms wait mapped new memory beside
     * memory about to come back (an LSTM's live run held 2.6x its peak). Native cudaFree makes the
     * program wait for the device at every free; here only a request that would pass the budget
     * waits, and the bound keeps a device that never goes idle from stalling it for good.
     */
    static final long DEVICE_WIDE_FREE_WAIT_NANOS = 100_000_000;
    /** The most same-size blocks a malloc/free loop rotates over while their frees wait ({@link #waitingBlock}). */
    static final int ROTATION_BLOCKS = 8;
    /** The most bytes of such blocks counted beside a request; larger blocks are not rotated. */
    static final long ROTATION_BYTES = 512L << 20;

    private final RegionHeap region;
    private final RegionHeap.OtherRegions others;
    private final PlacementChooser placer;
    /** Told when this path is inside its driver calls, so that a lone synchronisation waits them out. */
    private final DeviceWideFence deviceFence;
    /** One line per miss at debug level; null otherwise. */
    private final SlowPathLog log;

    SlowPath(RegionHeap region, String regionName, RegionHeap.OtherRegions others, DeviceWideFence deviceFence) {
        this.region = region;
        this.others = others;
        this.deviceFence = deviceFence;
        this.placer = new PlacementChooser(region);
        this.log = SlowPathLog.of(region, regionName);
    }

    long allocate(long bytes, long requested, long stream) {
        long counted = requested + waitingBlock(bytes, requested, stream);
        SlowPathLog.Miss miss = log == null ? null : log.begin(bytes, counted - requested, counted);
        region.oversized.giveBackAfterRefusal(requested);
        region.reclaimer.trimToBudget(counted);
        long address = 0;
        if (region.budget.wouldExceed(bytes, counted)) {
            if (miss != null) miss.waitStarts();
            boolean freed = region.waitForPendingFrees(STREAM_FREE_WAIT_NANOS, DEVICE_WIDE_FREE_WAIT_NANOS);
            if (freed) address = region.tryCachedFit(bytes, requested, stream);
            if (miss != null) miss.waitEnded(freed, address != 0);
        }
        if (address == 0) address = placeOnNewMemoryOrRecover(bytes, requested, counted, stream);
        if (miss != null) miss.end(counted);
        return address;
    }

    /** Places the request on new memory; at out-of-memory drains every cache once and retries. */
    private long placeOnNewMemoryOrRecover(long bytes, long requested, long counted, long stream) {
        try {
            return placeOnNewMemory(bytes, requested, counted, stream);
        } catch (DriverException e) {
            if (!e.isOutOfMemory()) throw e;
            // Seed 001, 5.2: drain what is cached, then retry once, on fresh address space.
            region.releaseCachedMemory(true);
            others.releaseCachedMemory(region);
            try {
                // Waiting for pending frees may have made a free block that fits: use it first.
                long address = region.tryCachedFit(bytes, requested, stream);
                if (address == 0) address = placeOnNewMemory(bytes, requested, requested, stream);
                region.accounting.recoveredFromOutOfMemory();
                return address;
            } catch (DriverException again) {
                if (!again.isOutOfMemory()) throw again;
                throw region.outOfMemory(requested, again);
            } catch (RegionHeap.RegionFullException setAside) {
                // The failed attempt's pages were set aside (its undo failed too) and no space is left
                // to retry on: report the out-of-memory rather than leak this internal signal.
                throw region.outOfMemory(requested, e);
            }
        }
    }

    /**
     * At a malloc/free loop's turn (the request comes right after a free of its size, nothing
     * allocated between: {@link RegionHeap#followsAFreeOfItsSize}), blocks of the request's size (to
     * the page) that wait for device work (a cudaFree's device synchronisation, another stream's
     * event) are still in use by the device, so the budget counts them beside the request: returns
     * {@code requested} times their number, at most {@value #ROTATION_BLOCKS} of them and
     * {@value #ROTATION_BYTES} bytes. The loop then rotates over a few blocks instead of waiting for
     * the device at every turn: it grows by one block only when every block it has is still
     * waiting, so it settles on as many as cover the synchronisation's latency. Only a loop that is
     * most of what the program holds counts them: its block is at least half the peak of live
     * bytes (a malloc/free benchmark, one buffer cycled). In a larger program a copy made at its
     * peak stays above it by the block's size (docs/cold-path.md, "A waiting block counted only
     * when the loop is most of the program"); there the request is backed within the budget like
     * any other, and past it waits for the pending frees, as a cudaFree would have natively. Any other request
     * counts none: a program whose thread runs ahead of the device meets waiting blocks of its
     * request's size at every step, and a copy for each of them raised its peak (docs/cold-path.md,
     * "CuPy without its pool"). Larger waiting blocks are
     * not counted, so a program whose frees all wait (cudaFree) does not map copies of its large
     * free blocks for smaller requests, and a block larger than the byte bound gets no copy: a
     * program's gigabyte tensors recur within a step (an LSTM's 1.6 GB logits and their gradient),
     * and a copy of one is a tenth or more of its peak, where a loop over such a block spends its
     * time on the device anyway. The extra blocks are backed as any request (capped handles, see
     * {@link #placeOnNewMemory}) and are cache like any other once their frees complete: trimmed
     * back to the budget by the next slow path, released at out-of-memory. Also hurries the fence
     * when a cudaFree's block that would fit waits for it.
     */
    private long waitingBlock(long bytes, long requested, long stream) {
        long sameSize = region.roundUpToPage(bytes) + region.pageBytes;
        int most = (int) Math.min(ROTATION_BLOCKS, ROTATION_BYTES / sameSize);
        int waiting;
        boolean fenceWouldFreeAFit;
        region.lock.lock();
        try {
            waiting = most == 0 || !loopIsMostOfTheProgram(requested) || !region.followsAFreeOfItsSize(bytes) ? 0
                    : region.freeLists.waitingFits(bytes, sameSize, stream, most);
            fenceWouldFreeAFit = region.freeLists.deviceWideFreeFits(bytes);
        } finally {
            region.lock.unlock();
        }
        // A cudaFree's block that would fit waits for the fence, which puts a lone free's
        // synchronisation off until someone could use the memory: this request could.
        if (fenceWouldFreeAFit) deviceFence.hurry();
        return requested * waiting;
    }

    /** Whether a request of {@code requested} bytes is at least half the peak of live bytes the budget reckons with. */
    private boolean loopIsMostOfTheProgram(long requested) {
        return requested >= region.budget.peak(requested) / 2;
    }

    /**
     * Places {@code bytes} on unmapped space, where {@link PlacementChooser} says, and maps the
     * pages it needs, calling the driver without the lock. If mapping fails, every handle mapped
     * here is unmapped again and pooled, so bookkeeping and driver state stay equal; the address
     * range goes back to the unmapped tree (dirty VA discard, seed 001 5.3), or is set aside when
     * an unmap failed too. The budget counts {@code counted} bytes for the request (see
     * {@link #waitingBlock}).
     */
    private long placeOnNewMemory(long bytes, long requested, long counted, long stream) {
        PhysicalBudget budget = region.budget;
        PlacementChooser.Placement placement;
        boolean loading;
        region.lock.lock();
        try {
            // The lock was left since the cache missed: frees of other threads may have made a free
            // block that fits now (the block below the unmapped space may even have grown past the
            // request, which would leave nothing to map). Take such a block first.
            int fit = region.freeLists.bestFit(bytes, stream);
            if (fit != NONE) return region.carveLive(fit, bytes, requested);
            boolean over = budget.wouldExceed(bytes, counted);
            long room = budget.room(counted);
            // Within the budget, map ahead up to one handle cap: later requests land there without
            // a driver call. Those pages get handles of their own, so they can still move while the
            // request lives.
            // A tag's region maps nothing ahead: its pages would be handles of their own (HandleSupply#servesTag).
            long ahead = region.handles.servesTag() ? 0 : Math.min(room, region.handles.handleCap(counted));
            placement = placer.take(bytes, stream, over, ahead);
            // A large loading request backed from nothing gets one handle. A rotation's block beside
            // one that waits for the device gets capped handles, as any request: with one handle its
            // pages, once partly reused by other sizes, could not move (docs/cold-path.md, "A
            // rotation's block backed as any request").
            loading = region.loading();
            region.inFlight.begin();
        } finally {
            region.lock.unlock();
        }

        HandleRun handles = new HandleRun();
        try {
            deviceFence.requestDriving();
            try {
                region.handles.acquire(placement.mapTo - placement.mapFrom, placement.neededTo - placement.mapFrom,
                        loading ? placement.wholeTo - placement.mapFrom : 0, counted, handles);
                region.pages.mapRun(placement.mapFrom, handles);
            } finally {
                deviceFence.requestDriven();
            }
        } catch (RuntimeException e) {
            boolean clean = region.handles.giveBackUnmapped(placement.mapFrom, handles);
            region.lock.lock();
            try {
                placer.giveBack(placement, clean); // not clean: the pages stay IN_FLIGHT for good (set aside)
                region.inFlight.end();
            } finally {
                region.lock.unlock();
            }
            throw e;
        }

        region.lock.lock();
        try {
            int id = placer.join(placement);
            region.inFlight.end();
            return region.takeLive(id, bytes, requested);
        } finally {
            region.lock.unlock();
        }
    }
}
