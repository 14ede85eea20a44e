package dev.vmmkit.trace;

import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.core.DeviceWideFreeClock;
import dev.vmmkit.core.ForwardingResource;
import dev.vmmkit.core.ManagedMemoryResource;

/**
 * An adaptor that records every request it forwards (as RMM's logging_resource_adaptor does):
 * each allocation after it succeeded, each free of a live allocation before it happens (another
 * thread may get the address back right after the free). A double free is the program's error,
 * not a request, so it is not recorded. A cudaFree's memory becomes reusable only once the device
 * has finished the work before it: the recorder is told when each has returned, with the resource's
 * clock of such frees, so it can write when. Closing closes the resource; the recorder belongs
 * to the caller.
 */
public final class RecordingResource extends ForwardingResource {
    private final AllocationRecorder recorder;
    /** When the resource's cudaFrees become reusable; null when it reuses their memory at once. */
    private final DeviceWideFreeClock clock;

    public RecordingResource(ManagedMemoryResource resource, AllocationRecorder recorder) {
        super(resource);
        this.recorder = recorder;
        this.clock = resource.deviceWideFreeClock();
    }

    /** {@code resource} itself when nothing is recorded, else the adaptor over it. */
    public static ManagedMemoryResource over(ManagedMemoryResource resource, AllocationRecorder recorder) {
        return recorder == AllocationRecorder.NONE ? resource : new RecordingResource(resource, recorder);
    }

    @Override
    public long allocate(long size, long stream) {
        if (recorder.isRecording()) recorder.beforeAllocation();
        long address = resource.allocate(size, stream);
        if (address != 0 && recorder.isRecording()) recorder.allocated(address, size, stream);
        return address;
    }

    @Override
    public void deallocate(long address, long stream) {
        boolean timed = false;
        if (recorder.isRecording()) {
            long size = resource.sizeOf(address);
            if (size >= 0) timed = recordFree(address, size, stream);
        }
        try {
            resource.deallocate(address, stream);
        } finally {
            if (timed) recorder.cudaFreeReturned(address, clock);
        }
    }

    /** Records a free before it is made; true when it is a cudaFree whose return the recorder must hear of. */
    private boolean recordFree(long address, long size, long stream) {
        if (stream == DeviceMemoryResource.DEVICE_WIDE_STREAM && clock != null) {
            recorder.cudaFreeRequested(address, size);
            return true;
        }
        recorder.freed(address, size, stream);
        return false;
    }

    /** A resize is recorded as a free of the old allocation and an allocation of the new one. */
    @Override
    public long reallocate(long address, long newSize, long stream) {
        long oldSize = recorder.isRecording() ? resource.sizeOf(address) : -1;
        if (oldSize >= 0) recorder.beforeAllocation();
        long moved = resource.reallocate(address, newSize, stream);
        if (oldSize >= 0) {
            if (recordFree(address, oldSize, stream)) recorder.cudaFreeReturned(address, clock);
            recorder.allocated(moved, newSize, stream);
        }
        return moved;
    }
}
