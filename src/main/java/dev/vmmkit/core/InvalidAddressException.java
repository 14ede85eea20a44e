package dev.vmmkit.core;

/** An address that is not a live allocation of this resource: a double free or an unknown pointer. */
public final class InvalidAddressException extends IllegalArgumentException {
    private final long address;

    public InvalidAddressException(long address, String why) {
        super(String.format("0x%x: %s", address, why));
        this.address = address;
    }

    public long address() {
        return address;
    }
}
