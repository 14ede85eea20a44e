package dev.vmmkit.interpose;

import dev.vmmkit.core.MemoryTagControl;

import java.util.ArrayDeque;
import java.util.BitSet;
import java.util.Iterator;
import java.util.function.IntFunction;

/**
 * The memory-tag regions each thread of the program has open, over all devices: a region opened
 * with {@code vmmkit_region_begin} tags the thread's allocations on any device, as its caller means
 * (a model spread over two GPUs inside one region). Each device has an allocator of its own, which
 * keeps its own regions: a region is begun on the current device's allocator when it opens, and on
 * another device's just before the thread's first allocation there while it is open, after the
 * regions around it (so each allocator's regions nest as the thread's do). It ends on every
 * allocator it reached. A region of no tag (a null tag) leaves the thread's allocations untagged,
 * the allocators' default tag too.
 */
final class ThreadTagRegions {
    /** One open region and the devices whose allocators it has been begun on. */
    private static final class Open {
        /** Null: a region of no tag. */
        final String tag;
        final boolean keepContents;
        final BitSet devices = new BitSet();

        Open(String tag, boolean keepContents) {
            this.tag = tag;
            this.keepContents = keepContents;
        }
    }

    private final ThreadLocal<ArrayDeque<Open>> open = ThreadLocal.withInitial(ArrayDeque::new);
    /** Whether any thread ever opened a region: until then an allocation costs this one read. */
    private volatile boolean anyOpened;

    /**
     * Opens a region of {@code tag} (null: of no tag) for this thread, begun on {@code device}'s
     * allocator {@code tags} (which checks the name: an {@link IllegalArgumentException} opens nothing).
     */
    void begin(String tag, boolean keepContents, int device, MemoryTagControl tags) {
        applyTo(device, tags); // the regions around it first
        beginOn(tags, tag, keepContents);
        Open region = new Open(tag, keepContents);
        region.devices.set(device);
        open.get().push(region);
        anyOpened = true;
    }

    /**
     * Before an allocation of this thread on {@code device}: begins there, outermost first, the
     * thread's open regions that have not reached that device's allocator {@code tags} yet.
     */
    void applyTo(int device, MemoryTagControl tags) {
        if (!anyOpened || tags == null) return;
        ArrayDeque<Open> stack = open.get();
        if (stack.isEmpty()) return;
        for (Iterator<Open> outermostFirst = stack.descendingIterator(); outermostFirst.hasNext(); ) {
            Open region = outermostFirst.next();
            if (region.devices.get(device)) continue;
            beginOn(tags, region.tag, region.keepContents);
            region.devices.set(device);
        }
    }

    private static void beginOn(MemoryTagControl tags, String tag, boolean keepContents) {
        if (tag == null) tags.beginUntaggedRegion();
        else tags.beginTagRegion(tag, keepContents);
    }

    /**
     * Closes this thread's innermost region on every allocator it reached ({@code tagsOf} gives a
     * device's); false when the thread has none open.
     */
    boolean end(IntFunction<MemoryTagControl> tagsOf) {
        ArrayDeque<Open> stack = open.get();
        Open region = stack.poll();
        if (region == null) return false;
        for (int device = region.devices.nextSetBit(0); device >= 0; device = region.devices.nextSetBit(device + 1)) {
            MemoryTagControl tags = tagsOf.apply(device);
            if (tags != null) tags.endTagRegion();
        }
        return true;
    }
}
