package dev.vmmkit.core;

/**
 * Memory tags of an allocator: a thread's allocations between {@link #beginTagRegion} and
 * {@link #endTagRegion} carry a tag, and a tag's memory can be given back to the device and brought
 * back at the same addresses. A tag's allocations live in reserved ranges and handles of their own,
 * so a pause gives back every page they hold (cached free pages included) and nothing else.
 */
public interface MemoryTagControl {
    /** The longest tag name, in characters. */
    int MAX_TAG_NAME_LENGTH = 256;

    /** Checks a tag's name as every call that takes one does. @throws IllegalArgumentException when it is null, empty or too long */
    static void checkTagName(String tag) {
        if (tag == null || tag.isEmpty()) throw new IllegalArgumentException("a memory tag needs a name");
        if (tag.length() > MAX_TAG_NAME_LENGTH) {
            throw new IllegalArgumentException("memory tag name longer than " + MAX_TAG_NAME_LENGTH + " characters");
        }
    }

    /**
     * This thread's next allocations carry {@code tag} until {@link #endTagRegion}; regions nest.
     * {@code keepContents} is the tag's setting, shared by all its allocations (the latest region
     * opened sets it): a pause copies their bytes to pinned host memory and a resume brings them
     * back; otherwise the contents after a resume are undefined (the memory is usable).
     *
     * @throws IllegalArgumentException when {@code tag} is null, empty or too long
     */
    void beginTagRegion(String tag, boolean keepContents);

    /**
     * This thread's next allocations carry no tag, not even the {@linkplain #setDefaultTag default
     * one}, until {@link #endTagRegion}; it nests with tag regions (one of them opened inside tags
     * again).
     */
    void beginUntaggedRegion();

    /** Leaves this thread's innermost region (of a tag or untagged). @throws IllegalStateException when none is open */
    void endTagRegion();

    /**
     * From now on, allocations made outside every region carry {@code tag}, on every thread (a
     * training process whose every tensor, gradients made on autograd's threads included, is paused
     * at once); null: none again. {@code keepContents} is the tag's setting, as a region of it opened
     * now would set it. A tag like any other: paused, resumed and opened in regions by its name.
     * Allocations made before keep the tag they carry.
     *
     * @throws IllegalArgumentException when {@code tag} is empty or too long
     */
    void setDefaultTag(String tag, boolean keepContents);

    /**
     * Gives back the physical memory of {@code tag} (every tag when null), keeping its addresses:
     * waits for the device's work, copies kept contents to pinned host memory, unmaps and releases
     * every handle. While paused, frees of the tag's blocks work and allocations into it fail with
     * {@link TagPausedException}. Pausing a paused tag does nothing.
     *
     * @throws IllegalArgumentException when no region of that name was ever opened
     * @throws CaptureUnderwayException when a CUDA stream capture is under way: nothing was done
     * @throws TagTransitionException   when a driver call failed partway; the tag is consistent and
     *                                  the call may be repeated (or {@link #resume} goes back)
     */
    void pause(String tag);

    /**
     * Backs {@code tag}'s ranges (every tag when null) with memory again at the same addresses, with
     * few large handles, and copies kept contents back. Resuming a running tag does nothing.
     *
     * @throws IllegalArgumentException when no region of that name was ever opened
     * @throws CaptureUnderwayException when a CUDA stream capture is under way: nothing was done
     * @throws TagTransitionException   when a driver call failed partway (out of memory, say); the
     *                                  tag is consistent and the call may be repeated
     */
    void resume(String tag);

    /**
     * Sets whether pauses of {@code tag} keep its contents, from the next pause on, as a region of it
     * opened now would (vLLM's sleep levels choose this per sleep).
     *
     * @throws IllegalArgumentException when {@code tag} is null or no region of that name was ever opened
     */
    void keepContents(String tag, boolean keepContents);

    /** True when a region named {@code tag} was ever opened on this allocator. */
    boolean knowsTag(String tag);

    /**
     * The pinned host memory held for tags now ({@link TagStats#hostBytesPinned}), without the rest
     * of the figures: a program polling whether its next pause will copy at the bus's speed takes
     * no region's lock.
     */
    long hostBytesPinned();

    /** The part of {@link #hostBytesPinned} ready for the next pause's copies ({@link TagStats#hostBytesKept}). */
    long hostBytesKept();

    /**
     * Frees the pinned host memory kept for the next pause. A resume gives the chunks that held a
     * tag's contents back to a pool rather than to the driver, and chunks pinned ahead while a kept
     * tag was allocated wait there too, because pinning host memory is many times slower than the
     * copies into it: the next pause then copies at the bus's speed. Nothing is pinned ahead again
     * until a kept tag allocates; closing the allocator frees the pool too.
     *
     * @throws dev.vmmkit.driver.DriverException when the driver refused to free some (they stay kept)
     */
    void freeKeptHostMemory();
}
