package dev.vmmkit.core;

/**
 * Memory tags of an allocator: a thread's allocations between {@link #beginTagRegion} and
 * {@link #endTagRegion} carry a tag, and a tag's memory can be given back to the device and brought
 * back at the same addresses. {@link VmmManager} documents the semantics.
 */
public interface MemoryTagControl {

    /** This thread's next allocations carry {@code tag}; see {@link VmmManager#beginTagRegion}. */
    void beginTagRegion(String tag, boolean keepContents);

    /** Leaves this thread's innermost tag region. */
    void endTagRegion();

    /** Gives back {@code tag}'s physical memory (every tag when null), keeping its addresses. */
    void pause(String tag);

    /** Brings {@code tag}'s memory back (every tag when null) at the same addresses. */
    void resume(String tag);

    /** True when a region named {@code tag} was ever opened on this allocator. */
    boolean knowsTag(String tag);
}
