package dev.vmmkit.core;

/**
 * The device cannot hold a request even after the pool was drained and the allocation retried.
 * Carries the figures a user needs to see why.
 */
public final class OutOfDeviceMemoryException extends RuntimeException {
    private final long requestedBytes;
    private final long liveBytes;
    private final long reservedBytes;
    private final long deviceFreeBytes;

    public OutOfDeviceMemoryException(long requestedBytes, long liveBytes, long reservedBytes,
                                      long deviceFreeBytes, Throwable cause) {
        super(String.format("out of device memory: requested %d bytes; live %d, reserved %d, device free %d",
                requestedBytes, liveBytes, reservedBytes, deviceFreeBytes), cause);
        this.requestedBytes = requestedBytes;
        this.liveBytes = liveBytes;
        this.reservedBytes = reservedBytes;
        this.deviceFreeBytes = deviceFreeBytes;
    }

    public long requestedBytes() {
        return requestedBytes;
    }

    public long liveBytes() {
        return liveBytes;
    }

    public long reservedBytes() {
        return reservedBytes;
    }

    public long deviceFreeBytes() {
        return deviceFreeBytes;
    }
}
