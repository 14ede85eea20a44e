package dev.vmmkit.lifetime;

/**
 * Something whose device memory is given back when its reference count reaches zero, as in Netty's
 * {@code ReferenceCounted}: tensors and the containers that hold them.
 *
 * <p>A new object has count 1. That first reference belongs to the innermost {@link Scope} open on
 * the creating thread, if any: closing the scope releases it. Passing an object to a method changes
 * no count (the callee borrows it); whatever keeps it beyond the call acquires its own reference
 * with {@link #retain()} and gives it back with {@link #release()}.
 */
public interface RefCounted extends AutoCloseable {

    /** The current reference count; 0 once freed. */
    int refCnt();

    /**
     * Adds a reference.
     *
     * @throws IllegalReferenceCountException when the object was already freed
     */
    RefCounted retain();

    /**
     * Gives back a reference; frees the object when it was the last. Returns true when it freed it.
     * A released object leaves its scope, which will not release it again.
     *
     * @throws IllegalReferenceCountException when the count is already 0 (released once too often)
     */
    boolean release();

    /**
     * Gives back the creator's reference now instead of at scope exit: leaves the scope (if it is
     * in one) and releases, so try-with-resources frees a temporary as early as possible.
     */
    @Override
    void close();
}
