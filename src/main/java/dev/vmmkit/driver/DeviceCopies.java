package dev.vmmkit.driver;

/**
 * Device-to-device copies, stream ordered, for the one allocator operation that moves bytes: growing
 * a buffer whose pages cannot follow it (see {@code VmmManager.reallocate}). Kept off
 * {@link VmmDriver} because nothing else copies; the host and CUDA drivers provide it.
 */
public interface DeviceCopies {

    /**
     * Queues a copy of {@code bytes} bytes from {@code src} to {@code dst} on {@code stream} (0 = the
     * default stream); both ranges must be mapped with access and must not overlap.
     */
    void copy(long dst, long src, long bytes, long stream);

    /** The copies of {@code driver}, or of the driver its adaptors wrap; null when it has none. */
    static DeviceCopies of(VmmDriver driver) {
        return DriverAdaptor.innermost(driver) instanceof DeviceCopies copies ? copies : null;
    }
}
