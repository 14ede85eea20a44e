package dev.vmmkit.tools.replay;

import dev.vmmkit.core.AllocatorStats;
import dev.vmmkit.core.BlockMap;
import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.core.ManagedMemoryResource;
import dev.vmmkit.core.ReplayedCovers;
import dev.vmmkit.core.VmmManager;

/** One fresh allocator for one replay: the resource requests go to, and where its figures come from. */
public interface ReplayTarget extends AutoCloseable {

    DeviceMemoryResource resource();

    /** The allocator's figures; read once, after the replay. */
    AllocatorStats stats();

    /** The allocator's address space block by block, for reports; empty when it cannot tell. */
    default BlockMap blockMap() {
        return new BlockMap(java.util.List.of());
    }

    /**
     * The streams this target's resource is given for a trace's {@code recorded} streams, in order;
     * by default the recorded numbers themselves (a resource that reads streams as numbers only).
     */
    default long[] streams(long[] recorded) {
        return recorded;
    }

    /**
     * Where the replay says when a cudaFree's memory became reusable ({@code AllocationTrace.COVER});
     * null when the resource does not wait for it, or waits on its own.
     */
    default ReplayedCovers replayedCovers() {
        return null;
    }

    /** Gives everything the allocator holds back to the driver. */
    @Override
    void close();

    /** A resource that keeps its own figures as a target; closing the target closes it. */
    static ReplayTarget of(ManagedMemoryResource manager) {
        return of(manager, null);
    }

    /**
     * As {@link #of(ManagedMemoryResource)}, giving the resource {@code streams}' stand-ins for the
     * recorded streams (null: the recorded numbers); closing the target closes them after the resource.
     */
    static ReplayTarget of(ManagedMemoryResource manager, ReplayStreams streams) {
        return new ReplayTarget() {
            @Override
            public DeviceMemoryResource resource() {
                return manager;
            }

            @Override
            public AllocatorStats stats() {
                return manager.stats();
            }

            @Override
            public BlockMap blockMap() {
                return manager instanceof VmmManager vmm ? vmm.blockMap() : ReplayTarget.super.blockMap();
            }

            @Override
            public ReplayedCovers replayedCovers() {
                return manager instanceof VmmManager vmm ? vmm.replayedCovers() : null;
            }

            @Override
            public long[] streams(long[] recorded) {
                return streams == null ? ReplayTarget.super.streams(recorded) : streams.standIns(recorded);
            }

            @Override
            public void close() {
                try {
                    manager.close();
                } finally {
                    if (streams != null) streams.close();
                }
            }
        };
    }
}
