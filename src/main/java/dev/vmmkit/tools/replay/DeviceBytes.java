package dev.vmmkit.tools.replay;

/**
 * Copies bytes between the host and allocated device memory, so that {@code replay --verify} can
 * write a pattern into each allocation and read it back. The host emulation does it with plain
 * memory copies ({@link HostDeviceBytes}); a CUDA implementation would use cuMemcpyHtoD/DtoH.
 * Until one exists, verify is refused on the cuda driver.
 */
public interface DeviceBytes {

    /** Copies {@code length} bytes from the start of {@code from} to device address {@code address}. */
    void write(long address, byte[] from, int length);

    /** Copies {@code length} bytes at device address {@code address} into the start of {@code into}. */
    void read(long address, byte[] into, int length);
}
