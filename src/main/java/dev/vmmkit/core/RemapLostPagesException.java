package dev.vmmkit.core;

import dev.vmmkit.driver.DriverException;

/**
 * A remap failed, and so did putting the destination's own pages back: the destination's first
 * bytes have no pages now. Copying into it would fault the device, so the caller is told instead.
 * The allocation can only be freed; its free gives every page back.
 */
public final class RemapLostPagesException extends RuntimeException {
    private final long address;
    private final boolean outOfMemory;

    public RemapLostPagesException(long address, long bytes, RuntimeException cause) {
        super(String.format("0x%x: a remap into it failed and so did mapping its own pages back; its first %s"
                + " have no pages and it can only be freed (%s)", address, ByteSize.format(bytes), cause.getMessage()), cause);
        this.address = address;
        this.outOfMemory = cause instanceof DriverException d && d.isOutOfMemory();
    }

    public long address() {
        return address;
    }

    /** True when the driver had no memory to map the destination's pages back. */
    public boolean isOutOfMemory() {
        return outOfMemory;
    }
}
