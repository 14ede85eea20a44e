package dev.vmmkit.driver;

/** A driver that can read and write its own device memory for the conformance checks. */
public interface DeviceBytesProvider {

    /** Byte access to the memory this driver maps. */
    DeviceBytes deviceBytes();
}
