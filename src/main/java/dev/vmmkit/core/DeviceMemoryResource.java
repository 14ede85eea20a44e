package dev.vmmkit.core;

/**
 * The one small interface every allocator and adaptor in vmmkit implements: device memory handed
 * out in stream order. Addresses and streams are plain {@code long}s (stream 0 is the default
 * stream, {@link #DEVICE_WIDE_STREAM} a cudaFree), so a call allocates nothing.
 *
 * <p>Size 0 is free: {@code allocate(0, s)} returns the null address 0, and {@code deallocate(0, s)}
 * does nothing, as cudaMalloc/cudaFree do.
 */
public interface DeviceMemoryResource {
    /**
     * Stream value for cudaFree-style frees: the memory is not handed to any later allocation,
     * unmapped or released until all work submitted to the device before the free, on every
     * stream (non-blocking ones included), has completed. The free itself neither blocks nor calls
     * the driver: a later slow path asks for a device synchronisation (cuCtxSynchronize, in the
     * relaxed stream-capture mode) that runs on the "vmmkit-device-fence" thread, and the memory
     * becomes reusable once one that started after the free has finished. Only running out of
     * memory, and closing the resource, wait for it.
     */
    long DEVICE_WIDE_STREAM = -1L;

    /**
     * Returns the address of at least {@code size} bytes, usable by work queued on {@code stream}.
     *
     * @throws IllegalArgumentException for a negative size
     * @throws OutOfDeviceMemoryException when the device cannot hold the request, even after recovery
     */
    long allocate(long size, long stream);

    /**
     * Gives back memory from {@link #allocate}. Work queued on {@code stream} before this call may
     * still use it; the resource never hands it to other streams before that work has completed.
     *
     * @throws InvalidAddressException for an address that is not live (double free, unknown pointer)
     */
    void deallocate(long address, long stream);
}
