package dev.vmmkit.trace;

import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.core.DeviceWideFreeClock;

/**
 * Where a program's requests are recorded ({@code vmmkit run --trace}). Kept behind this small
 * interface so that tests can record in memory and a run without a trace records nothing.
 */
public interface AllocationRecorder extends AutoCloseable {

    /** Records nothing. */
    AllocationRecorder NONE = new AllocationRecorder() {
        @Override
        public boolean isRecording() {
            return false;
        }

        @Override
        public void allocated(long address, long size, long stream) {
        }

        @Override
        public void freed(long address, long size, long stream) {
        }

        @Override
        public void close() {
        }
    };

    /** False for {@link #NONE} (and a recorder that stopped), so callers can skip finding a size. */
    boolean isRecording();

    /**
     * An allocation is about to be asked for: a recorder writes what happened before it (the
     * cudaFrees whose memory was back by now) before the allocation can change it (a wait inside
     * it may bring more back, which belongs after it).
     */
    default void beforeAllocation() {
    }

    void allocated(long address, long size, long stream);

    /**
     * As {@link #allocated}, for a request that gave up waiting for memory freed by cudaFree (the
     * device still busy past the bound, {@link DeviceWideFreeClock#waitsGivenUp}), so that a
     * replay gives up there too instead of waiting for the device.
     */
    default void allocatedAfterGivingUpWaiting(long address, long size, long stream) {
        allocated(address, size, stream);
    }

    /**
     * A free the program asked for, before it is made, whose memory the resource may reuse at once;
     * {@code size} is -1 when unknown.
     */
    void freed(long address, long size, long stream);

    /**
     * A cudaFree the program asked for, before it is made, whose memory becomes reusable only once
     * the device has finished the work before it; {@link #cudaFreeReturned} follows once it is made.
     */
    default void cudaFreeRequested(long address, long size) {
        freed(address, size, DeviceMemoryResource.DEVICE_WIDE_STREAM);
    }

    /**
     * The cudaFree of {@code address} has returned (or failed): {@code clock}, the resource's, says
     * when its memory became reusable, so a recorder may write when.
     */
    default void cudaFreeReturned(long address, DeviceWideFreeClock clock) {
    }

    @Override
    void close();
}
