package dev.vmmkit.core;

import dev.vmmkit.driver.DriverException;
import org.agrona.collections.IntArrayList;
import org.agrona.collections.LongArrayList;
import org.agrona.collections.LongHashSet;

import static dev.vmmkit.core.BlockTable.FREE;
import static dev.vmmkit.core.BlockTable.IN_FLIGHT;
import static dev.vmmkit.core.BlockTable.NONE;
import static dev.vmmkit.core.BlockTable.UNMAPPED;
import static dev.vmmkit.core.StreamWaitList.NO_PENDING_WORK;

/**
 * The aliases of one {@link RegionHeap}. After a remap ({@link RegionRemapper#remap}) the
 * destination owns the source's physical pages, and the source's address still maps them too: the
 * source is an <em>alias</em> of the destination's first bytes until it is freed. A stray read
 * through it reads valid memory instead of faulting the device. An alias's pages are never cached
 * as free memory (a later allocation would write into the destination) and never released by it:
 * when the alias is freed, its range waits until the work queued before the free has completed, as
 * any free does, and is then unmapped and becomes plain address space.
 *
 * <p>A destination that a remap left without its first pages ({@link RemapLostPagesException}) is
 * kept here too: like an alias it must not be remapped, resized or cached as mapped memory, and its
 * free unmaps the aliased mappings left in it. Its own pages past them become free memory then.
 *
 * <p>Every method runs under the region's lock.
 */
final class RegionAliases {
    private final RegionHeap region;
    private final BlockTable blocks;
    /** Addresses of live allocations whose pages another allocation owns, or that lost their first pages. */
    private final LongHashSet aliases = new LongHashSet();
    /** Those of {@link #aliases} that lost their first pages in a failed remap. */
    private final LongHashSet withoutPages = new LongHashSet();
    /** Freed aliases waiting for earlier work before their range is unmapped: block, stream, free sequence. */
    private final IntArrayList retiringIds = new IntArrayList();
    private final LongArrayList retiringStreams = new LongArrayList();
    private final LongArrayList retiringSequences = new LongArrayList();
    /** The manager's record of handles that aliases map. */
    private final AliasedHandles aliasedHandles;

    RegionAliases(RegionHeap region, AliasedHandles aliasedHandles) {
        this.region = region;
        this.blocks = region.blocks;
        this.aliasedHandles = aliasedHandles;
    }

    boolean isAlias(long address) {
        return !aliases.isEmpty() && aliases.contains(address);
    }

    /** The live allocation at {@code address} maps pages another allocation owns from now on. */
    void add(long address) {
        aliases.add(address);
    }

    /** The live allocation at {@code address} lost its first pages in a failed remap: it can only be freed. */
    void addWithoutPages(long address) {
        aliases.add(address);
        withoutPages.add(address);
    }

    /** True when the live allocation at {@code address} lost its first pages ({@link #addWithoutPages}). */
    boolean lostPages(long address) {
        return !withoutPages.isEmpty() && withoutPages.contains(address);
    }

    /** An alias maps {@code handle} (once per mapping). */
    void mapped(long handle) {
        aliasedHandles.mapped(handle);
    }

    /**
     * Called whenever the region would pool or release {@code handle}: true (and the handle is kept
     * here) while an alias still maps it, so that it is neither mapped for another allocation nor
     * counted as released while it is still in use. It goes once the last alias mapping it does.
     */
    boolean keepsWhileAliased(long handle, long bytes) {
        return aliasedHandles.keep(handle, bytes);
    }

    /**
     * Called by the region's free of live block {@code id}: when it is an alias, keeps its range
     * out of the free lists until the work queued on {@code stream} before the free has completed,
     * then {@link #unmapRetiredAliases} unmaps it. Returns true when it took the block.
     */
    boolean retiresAlias(int id, long stream) {
        if (aliases.isEmpty() || !aliases.remove(blocks.address[id])) return false;
        withoutPages.remove(blocks.address[id]);
        retiringIds.addInt(id);
        retiringStreams.addLong(stream);
        retiringSequences.addLong(region.freeLists.nextFreeSequence());
        return true; // the block stays LIVE-kind meanwhile, so nothing merges into it or lands on it
    }

    /** Unmaps freed aliases whose earlier work has completed. Never waits. */
    void unmapRetiredAliases() {
        for (int i = retiringIds.size() - 1; i >= 0; i--) {
            boolean done = region.freeLists.completedUpTo(retiringStreams.getLong(i)) >= retiringSequences.getLong(i);
            if (done && unmapAliasPages(retiringIds.getInt(i), false)) {
                giveBackRange(retiringIds.getInt(i));
                retiringIds.fastUnorderedRemove(i);
                retiringStreams.fastUnorderedRemove(i);
                retiringSequences.fastUnorderedRemove(i);
            }
        }
    }

    /** At close: unmaps every alias, live or freed, so that the close releases each handle once, through its owner. */
    void unmapAllAliases() {
        for (int i = 0; i < retiringIds.size(); i++) unmapAliasPages(retiringIds.getInt(i), true);
        for (LongHashSet.LongIterator it = aliases.iterator(); it.hasNext(); ) {
            int id = (int) region.liveByAddress.get(it.nextValue());
            if (id != NONE) unmapAliasPages(id, true);
        }
        retiringIds.clear();
        retiringStreams.clear();
        retiringSequences.clear();
        aliases.clear();
        withoutPages.clear();
    }

    /**
     * Returns retired block {@code id}, its aliased pages unmapped, to the region: unmapped stretches
     * become address space, and pages still mapped (a destination's own pages past a failed remap)
     * free memory that no queued work touches, so that no mapped page lies in unmapped space.
     */
    private void giveBackRange(int id) {
        long end = blocks.end(id);
        int piece = id;
        while (true) {
            long from = blocks.address[piece];
            boolean mapped = region.pages.isMapped(from);
            long to = stretchEnd(from, end, mapped);
            int rest = NONE;
            if (to < end) {
                rest = blocks.newBlock(IN_FLIGHT, to, end - to); // not merged with, until it is settled below
                blocks.size[piece] = to - from;
                blocks.linkAfter(piece, rest);
            }
            if (mapped) {
                blocks.kind[piece] = FREE;
                blocks.requestedOrStream[piece] = NO_PENDING_WORK;
                region.freeLists.add(piece);
            } else {
                blocks.kind[piece] = UNMAPPED;
                region.unmapped.insert(region.coalesceUnmapped(piece));
            }
            if (rest == NONE) return;
            piece = rest;
        }
    }

    /** Where the stretch of pages from {@code from} that are all mapped, or all unmapped, ends (at most {@code end}). */
    private long stretchEnd(long from, long end, boolean mapped) {
        long va = from;
        while (va < end && region.pages.isMapped(va) == mapped) {
            va = mapped ? region.pages.handleEnd(va) : va + region.pageBytes;
        }
        return Math.min(va, end);
    }

    /**
     * Unmaps the pages of alias block {@code id} that map aliased handles (each stays with its
     * owner, or goes back once no alias maps it); false, with the runs it could not unmap still
     * mapped, when an unmap fails, unless {@code closing}.
     */
    private boolean unmapAliasPages(int id, boolean closing) {
        long address = blocks.address[id];
        long end = blocks.end(id);
        HandleRun unmapped = new HandleRun();
        boolean all = true;
        // Run by run, aliased handles alone: a destination that two failures left without its pages
        // (RegionRemapper#remap) may map a handle or two with holes around them; its own pages past
        // the remap, which neighbours may share, stay as they are.
        for (long va = address; va < end; ) {
            if (!aliasedAt(va)) {
                va = region.pages.isMapped(va) ? region.pages.handleEnd(va) : va + region.pageBytes;
                continue;
            }
            long runEnd = va;
            while (runEnd < end && aliasedAt(runEnd)) runEnd = region.pages.handleEnd(runEnd);
            try {
                region.pages.unmapRange(va, runEnd, unmapped);
            } catch (DriverException e) {
                if (closing) region.pages.handlesOf(va, runEnd, unmapped);
                else all = false; // still mapped: try again later
            }
            va = runEnd;
        }
        for (int i = 0; i < unmapped.count(); i++) {
            long bytes = aliasedHandles.unmapped(unmapped.handle(i));
            if (bytes != 0) region.handles.poolOrRelease(unmapped.handle(i), bytes);
        }
        return all;
    }

    private boolean aliasedAt(long va) {
        return region.pages.isMapped(va) && aliasedHandles.isAliased(region.pages.handleAt(va));
    }
}
