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
 * clock of such frees, so it can write when, and whether a request gave up waiting for them.
 * Closing closes the resource; the recorder belongs to the caller.
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
        if (!recorder.isRecording()) return resource.allocate(size, stream);
        recorder.beforeAllocation();
        long givenUp = waitsGivenUp();
        long address = resource.allocate(size, stream);
        if (address != 0) recordAllocation(address, size, stream, givenUp);
        return address;
    }

    /** This thread's waits for cudaFrees' memory that gave up so far; read around a request. */
    private long waitsGivenUp() {
        return clock == null ? 0 : clock.waitsGivenUp();
    }

    private void recordAllocation(long address, long size, long stream, long givenUpBefore) {
        if (waitsGivenUp() != givenUpBefore) recorder.allocatedAfterGivingUpWaiting(address, size, stream);
        else recorder.allocated(address, size, stream);
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
        long givenUp = oldSize >= 0 ? waitsGivenUp() : 0;
        long moved = resource.reallocate(address, newSize, stream);
        if (oldSize >= 0) {
            if (recordFree(address, oldSize, stream)) recorder.cudaFreeReturned(address, clock);
            recordAllocation(moved, newSize, stream, givenUp);
        }
        return moved;
    }
}
