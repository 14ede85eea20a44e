package dev.vmmkit.driver;

/**
 * Device events, as a stream-ordered allocator needs them: mark a point in a stream's work, then
 * ask whether the work before it has finished. Streams and events are opaque {@code long}s
 * (0 is the default stream). {@link #synchronizeDevice} waits for the whole device instead, for
 * frees that must wait for work on streams the allocator never saw.
 */
public interface StreamEvents {

    /** Creates an event with timing disabled. */
    long create();

    /** Records {@code event} at the current end of {@code stream}'s queued work. */
    void record(long event, long stream);

    /** True when all work recorded before {@code event} has completed; never blocks. */
    boolean isComplete(long event);

    /** Blocks until all work recorded before {@code event} has completed. */
    void synchronize(long event);

    /** Destroys an event. */
    void destroy(long event);

    /**
     * Blocks the calling thread until all work submitted to the device before the call, on every
     * stream (non-blocking ones included), has completed. On CUDA: cuCtxSynchronize on the
     * context current on the thread, which is the device's primary context unless the thread
     * already had one; the call does not break a CUDA-graph capture running on another thread.
     */
    void synchronizeDevice();

    /**
     * Readies the calling thread for {@link #synchronizeDevice}, without synchronising or making
     * anything: on CUDA, makes the device's context current on it and sets its stream-capture mode
     * once. A thread that will synchronise later (the fence's) calls it when it starts, so that its
     * first synchronisation does not set the thread up beside a program's first allocations.
     */
    default void prepareThread() {
    }
}
