package dev.vmmkit.engine;

import dev.vmmkit.core.ManagedMemoryResource;
import dev.vmmkit.core.MemoryTagControl;
import dev.vmmkit.core.TagStats;
import dev.vmmkit.core.TagTransitionException;
import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.FaultInjectingDriver;
import dev.vmmkit.driver.FaultPlan;
import dev.vmmkit.driver.VmmDriver;

/**
 * The worker's side of pausing its model. Every device allocation the engine makes on the worker's
 * threads (alloc_device and its own CUDA calls, in engine_load_model and in every later call)
 * carries one memory tag that keeps its contents; a pause gives the tag's physical memory back
 * with the bytes copied to pinned host memory, and a resume brings them back at the same
 * addresses. One tag for everything: the ABI does not say which allocation holds weights and which
 * a cache, and an engine may keep state in device memory between calls, so only keeping all of it
 * is right for every engine (docs/engine.md, "Pausing idle models").
 */
final class WorkerModelTag {
    /** The tag's name in the worker's allocator (one model per worker). */
    static final String NAME = "model";
    /**
     * A host-side system property, passed on to workers, naming a driver call ({@link DriverCall}'s
     * name, e.g. {@code unmap}) that fails once in every pause: the tests' way to make a pause fail.
     */
    static final String PAUSE_FAULT_PROPERTY = "vmmkit.worker.pauseFault";

    /** What a pause did: the tag's physical bytes given back, bytes kept in host memory, and its time. */
    record Paused(long pausedBytes, long keptBytes, long nanos) {
    }

    private final ManagedMemoryResource allocator;
    private final MemoryTagControl tags;
    private final FaultPlan faults;
    private final DriverCall faultyCall;

    private WorkerModelTag(ManagedMemoryResource allocator, FaultPlan faults, DriverCall faultyCall) {
        this.allocator = allocator;
        this.tags = allocator.tagControl();
        this.faults = faults;
        this.faultyCall = faultyCall;
    }

    /** The worker's driver, wrapped for the pause fault when the property asks for one. */
    static VmmDriver driverFor(VmmDriver driver) {
        return pauseFault() == null ? driver : new FaultInjectingDriver(driver, new FaultPlan());
    }

    /** The tag over the worker's allocator (opened over {@link #driverFor}'s driver). */
    static WorkerModelTag over(ManagedMemoryResource allocator, VmmDriver driver) {
        DriverCall call = pauseFault();
        FaultPlan plan = driver instanceof FaultInjectingDriver faulty ? faulty.plan() : null;
        return new WorkerModelTag(allocator, plan, plan == null ? null : call);
    }

    private static DriverCall pauseFault() {
        String name = System.getProperty(PAUSE_FAULT_PROPERTY);
        if (name == null || name.isBlank()) return null;
        for (DriverCall call : DriverCall.values()) {
            if (call.name().equalsIgnoreCase(name.trim())) return call;
        }
        throw new IllegalArgumentException(PAUSE_FAULT_PROPERTY + " '" + name + "' names no driver call");
    }

    /** This thread's allocations carry the model's tag until {@link #leave}. */
    void enter() {
        tags.beginTagRegion(NAME, true);
    }

    void leave() {
        tags.endTagRegion();
    }

    /**
     * Gives the model's device memory back, its contents kept.
     *
     * @throws TagTransitionException when a driver call failed partway (the tag stays consistent)
     */
    Paused pause() {
        if (faults != null) faults.failNth(faultyCall, 1, CudaResult.UNKNOWN);
        long started = System.nanoTime();
        try {
            if (tags.knowsTag(NAME)) tags.pause(NAME); // a model that allocated nothing has nothing to give back
        } finally {
            if (faults != null) faults.clear();
        }
        long nanos = System.nanoTime() - started;
        TagStats.Tag tag = tag();
        return new Paused(tag == null ? 0 : tag.pausedBytes(), tag == null ? 0 : tag.keptBytes(), nanos);
    }

    /**
     * Brings the model's memory and contents back; returns the time it took. The pinned host memory
     * that held the contents is freed afterwards ({@link #freeHostCopy}), so a running model holds none.
     *
     * @throws TagTransitionException when a driver call failed partway (out of device memory, say)
     */
    long resume() {
        long started = System.nanoTime();
        if (tags.knowsTag(NAME)) tags.resume(NAME);
        return System.nanoTime() - started;
    }

    /** Frees the pinned host memory a resume gave back for the next pause. */
    void freeHostCopy() {
        try {
            tags.freeKeptHostMemory();
        } catch (RuntimeException e) {
            System.getLogger("dev.vmmkit.engine.worker").log(System.Logger.Level.WARNING,
                    "pinned host memory of the model's last pause stays kept: " + e.getMessage());
        }
    }

    /** Bytes the engine's live allocations in the tag take. */
    long taggedBytes() {
        TagStats.Tag tag = tag();
        return tag == null ? 0 : tag.liveBytes();
    }

    private TagStats.Tag tag() {
        for (TagStats.Tag t : allocator.stats().tags().tags()) {
            if (t.name().equals(NAME)) return t;
        }
        return null;
    }
}
