package dev.vmmkit.core;

import dev.vmmkit.driver.VmmDriver;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The memory tags of one allocator: which tag each thread's allocations carry now, and pause and
 * resume by name. A thread enters a tag with {@link #begin} and leaves it with {@link #end}
 * (regions nest); its allocations in between go to the tag's own regions ({@link MemoryTag}).
 * Outside every region they carry the allocator's default tag ({@link #setDefault}), if any; a
 * region of no tag ({@link #beginUntagged}) keeps a thread's allocations out of it. A thread in no
 * tag costs the allocation path two volatile reads until some thread enters one.
 */
final class MemoryTags {
    private final VmmDriver driver;
    private final MemoryTag.RegionMaker maker;
    /** Gives back every cached page of the allocator (a resume that found no memory). */
    private final Runnable releaseCachedMemory;
    private final ConcurrentHashMap<String, MemoryTag> byName = new ConcurrentHashMap<>();
    private final List<MemoryTag> inOrder = new java.util.concurrent.CopyOnWriteArrayList<>();
    private final ThreadLocal<ArrayDeque<MemoryTag>> entered = ThreadLocal.withInitial(ArrayDeque::new);
    private volatile boolean anyEntered;
    /** What an allocation outside every region carries, or null. */
    private volatile MemoryTag defaultTag;
    /** On a thread's stack: a region of no tag, default tag included ({@link #beginUntagged}). */
    private static final MemoryTag UNTAGGED = new MemoryTag("(untagged)", false);
    private volatile RegionHeap[] allRegions = new RegionHeap[0];
    /** Pinned host chunks for kept contents: pinned ahead, held by paused tags, kept between pauses. */
    private final PinnedChunks pinned;
    /** Pins chunks in the background while tags that keep their contents grow (off until {@link #pinAhead}). */
    private final PinAhead pinAhead;
    /** The stream captures under way on the device: no pause or resume runs beside one. */
    private final StreamCaptures captures;

    MemoryTags(VmmDriver driver, MemoryTag.RegionMaker maker, Runnable releaseCachedMemory, StreamCaptures captures) {
        this.driver = driver;
        this.releaseCachedMemory = releaseCachedMemory;
        this.pinned = new PinnedChunks(driver.transfers());
        this.pinAhead = new PinAhead(pinned, this::bytesToKeepNow, captures);
        this.captures = captures;
        this.maker = (tag, bytes) -> {
            RegionHeap region = maker.make(tag, bytes);
            synchronized (this) {
                RegionHeap[] grown = java.util.Arrays.copyOf(allRegions, allRegions.length + 1);
                grown[allRegions.length] = region;
                allRegions = grown;
            }
            return region;
        };
    }

    /** This thread's next allocations carry {@code tag}, whose pauses keep contents when {@code keepContents}. */
    void begin(String tag, boolean keepContents) {
        entered.get().push(known(tag, keepContents));
        anyEntered = true;
    }

    /** This thread's next allocations carry no tag, not even the default one, until {@link #end}. */
    void beginUntagged() {
        entered.get().push(UNTAGGED);
        anyEntered = true;
    }

    /**
     * From now on allocations made outside every region, on any thread, carry {@code tag}, whose
     * pauses keep contents when {@code keepContents} (the tag's setting, as a region of it opened now
     * would set it); null: none again. Allocations made before keep the tag they have.
     */
    void setDefault(String tag, boolean keepContents) {
        defaultTag = tag == null ? null : known(tag, keepContents);
    }

    /** The tag named {@code tag} (checked), made if new, with its setting set to {@code keepContents}. */
    private MemoryTag known(String tag, boolean keepContents) {
        MemoryTagControl.checkTagName(tag);
        MemoryTag t = byName.computeIfAbsent(tag, name -> {
            MemoryTag made = new MemoryTag(name, keepContents);
            inOrder.add(made);
            return made;
        });
        setKeepContents(t, keepContents);
        return t;
    }

    /** Sets the setting of {@code tag} (known: IllegalArgumentException otherwise), as a region of it opened now would. */
    void keepContents(String tag, boolean keepContents) {
        if (tag == null) throw new IllegalArgumentException("keeping contents is each tag's setting: name a tag");
        setKeepContents(named(tag).getFirst(), keepContents);
    }

    private void setKeepContents(MemoryTag t, boolean keepContents) {
        t.keepContents(keepContents);
        if (keepContents) pinAhead.wake(); // the tag may hold memory already
    }

    /** Pins up to {@code limitBytes} of host memory for tags that keep their contents, ahead of their first pause; 0: off. */
    void pinAhead(long limitBytes) {
        pinAhead.limit(limitBytes);
        if (!inOrder.isEmpty()) pinAhead.wake(); // no thread until some tag exists
    }

    /** Waits until pinning ahead has nothing left to do (tests). */
    void awaitPinAhead() throws InterruptedException {
        pinAhead.awaitIdle();
    }

    /** What the running tags that keep their contents would copy if paused now. */
    private long bytesToKeepNow() {
        long sum = 0;
        for (MemoryTag t : inOrder) sum += t.bytesToKeepIfRunning();
        return sum;
    }

    /** Leaves this thread's innermost region. */
    void end() {
        ArrayDeque<MemoryTag> stack = entered.get();
        if (stack.isEmpty()) throw new IllegalStateException("no memory tag region is open on this thread");
        stack.pop();
    }

    /** The tag this thread's allocations carry now, or null. */
    MemoryTag current() {
        MemoryTag fallback = defaultTag;
        if (!anyEntered) return fallback;
        MemoryTag innermost = entered.get().peek();
        if (innermost == null) return fallback;
        return innermost == UNTAGGED ? null : innermost;
    }

    long allocate(MemoryTag tag, long bytes, long requested, long stream) {
        long address = tag.allocate(bytes, requested, stream, maker);
        if (tag.keepsContents()) pinAhead.wake();
        return address;
    }

    /**
     * Pauses {@code tag}, or every tag when null: those that discard their contents first, so that
     * the driver clears the memory they give back while the kept tags' bytes are copied out (copies
     * to the host do not feel it), not during a resume that follows at once (docs/memory-tags.md,
     * "Releasing during the backup").
     */
    void pause(String tag) {
        List<MemoryTag> order = new ArrayList<>(); // the tags that discard, then those that keep
        List<MemoryTag> keeping = new ArrayList<>();
        for (MemoryTag t : named(tag)) (t.keepsContents() ? keeping : order).add(t);
        order.addAll(keeping);
        outsideCaptures("pause", tag, () -> {
            for (MemoryTag t : order) t.pause(driver.transfers(), driver.events(), pinned);
        });
    }

    /** Resumes {@code tag}, or every tag when null. */
    void resume(String tag) {
        List<MemoryTag> tags = named(tag);
        outsideCaptures("resume", tag, () -> {
            for (MemoryTag t : tags) t.resume(releaseCachedMemory);
        });
    }

    /**
     * Runs a pause or resume unless a stream capture is under way on the device; a capture that
     * begins meanwhile waits until it has returned ({@link StreamCaptures}).
     *
     * @throws CaptureUnderwayException when a capture is under way: nothing was done
     */
    private void outsideCaptures(String call, String tag, Runnable transition) {
        if (!captures.startUnlessCapturing()) throw new CaptureUnderwayException(call, tag, driver.device());
        try {
            transition.run();
        } finally {
            captures.finished();
        }
    }

    private List<MemoryTag> named(String tag) {
        if (tag == null) return inOrder;
        MemoryTag t = byName.get(tag);
        if (t == null) throw new IllegalArgumentException("unknown memory tag '" + tag + "' (no allocation region of that name was opened)");
        return List.of(t);
    }

    boolean knows(String tag) {
        return tag != null && byName.containsKey(tag);
    }

    /** The region of a tag whose range holds {@code address}, or null. */
    RegionHeap regionOf(long address) {
        for (RegionHeap r : allRegions) if (r.contains(address)) return r;
        return null;
    }

    /** Throws {@link TagPausedException} when {@code address} lies in a tag that is not running. */
    void refuseWhilePaused(long address) {
        RegionHeap region = regionOf(address);
        MemoryTag tag = region == null ? null : tagOf(region);
        if (tag != null && !tag.isRunning()) throw new TagPausedException(tag.name);
    }

    /** The tag that owns {@code region}, or null. */
    MemoryTag tagOf(RegionHeap region) {
        for (MemoryTag t : inOrder) {
            for (RegionHeap r : t.regions()) if (r == region) return t;
        }
        return null;
    }

    RegionHeap[] regions() {
        return allRegions;
    }

    void releaseCachedMemory(boolean waitForFrees) {
        for (MemoryTag t : inOrder) t.releaseCachedMemory(waitForFrees, false);
    }

    /** As {@link #releaseCachedMemory}, skipping tags busy now (out-of-memory recovery of an allocation). */
    void releaseIdleCachedMemory() {
        for (MemoryTag t : inOrder) t.releaseCachedMemory(true, true);
    }

    long hostBytesPinned() {
        return pinned.pinnedBytes();
    }

    long hostBytesKept() {
        return pinned.keptBytes();
    }

    TagStats stats() {
        if (inOrder.isEmpty()) return TagStats.NONE;
        List<TagStats.Tag> tags = new ArrayList<>();
        long paused = 0;
        for (MemoryTag t : inOrder) {
            TagStats.Tag s = t.stats();
            paused += s.pausedBytes();
            tags.add(s);
        }
        return new TagStats(paused, pinned.keptBytes(), pinned.pinnedBytes(), pinAhead.pinnedAheadBytes(), tags);
    }

    /** Closes every tag's regions, then frees the pinned host memory kept for pauses. */
    void close() {
        pinAhead.close();
        for (MemoryTag t : inOrder) t.close();
        allRegions = new RegionHeap[0];
        pinned.close();
    }

    /**
     * Frees the pinned host memory kept for the next pause (the copies of tags paused now stay).
     *
     * @throws dev.vmmkit.driver.DriverException when the driver refused to free some; they stay kept
     */
    void freeKeptHostMemory() {
        pinned.freeAll();
    }

}
