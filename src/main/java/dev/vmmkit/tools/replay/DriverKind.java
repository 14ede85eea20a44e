package dev.vmmkit.tools.replay;

/** The driver {@code vmmkit replay --driver} asks for. */
public enum DriverKind {
    /** The host emulation: device memory is host memory, the GPU is not touched. */
    HOST,
    /** CUDA's virtual memory API on a real device. */
    CUDA,
    /** CUDA when a device is present, otherwise the host emulation. */
    AUTO
}
