package dev.vmmkit.trace;

import dev.vmmkit.core.ForwardingResource;
import dev.vmmkit.core.ManagedMemoryResource;

/**
 * An adaptor that records every request it forwards (as RMM's logging_resource_adaptor does):
 * each allocation after it succeeded, each free of a live allocation before it happens (another
 * thread may get the address back right after the free). A double free is the program's error,
 * not a request, so it is not recorded. Closing closes the resource; the recorder belongs to the caller.
 */
public final class RecordingResource extends ForwardingResource {
    private final AllocationRecorder recorder;

    public RecordingResource(ManagedMemoryResource resource, AllocationRecorder recorder) {
        super(resource);
        this.recorder = recorder;
    }

    /** {@code resource} itself when nothing is recorded, else the adaptor over it. */
    public static ManagedMemoryResource over(ManagedMemoryResource resource, AllocationRecorder recorder) {
        return recorder == AllocationRecorder.NONE ? resource : new RecordingResource(resource, recorder);
    }

    @Override
    public long allocate(long size, long stream) {
        long address = resource.allocate(size, stream);
        if (address != 0 && recorder.isRecording()) recorder.allocated(address, size, stream);
        return address;
    }

    @Override
    public void deallocate(long address, long stream) {
        if (recorder.isRecording()) {
            long size = resource.sizeOf(address);
            if (size >= 0) recorder.freed(address, size, stream);
        }
        resource.deallocate(address, stream);
    }

    /** A resize is recorded as a free of the old allocation and an allocation of the new one. */
    @Override
    public long reallocate(long address, long newSize, long stream) {
        long oldSize = recorder.isRecording() ? resource.sizeOf(address) : -1;
        long moved = resource.reallocate(address, newSize, stream);
        if (oldSize >= 0) {
            recorder.freed(address, oldSize, stream);
            recorder.allocated(moved, newSize, stream);
        }
        return moved;
    }
}
