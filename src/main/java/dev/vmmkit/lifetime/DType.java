package dev.vmmkit.lifetime;

/** Element types. Only float32 for now: every kernel of {@link dev.vmmkit.compute.DeviceCompute} is float32. */
public enum DType {
    FLOAT32("float32", 4);

    private final String label;
    private final int bytes;

    DType(String label, int bytes) {
        this.label = label;
        this.bytes = bytes;
    }

    /** Bytes per element. */
    public int bytes() {
        return bytes;
    }

    @Override
    public String toString() {
        return label;
    }
}
