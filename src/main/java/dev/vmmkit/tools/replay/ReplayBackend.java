package dev.vmmkit.tools.replay;

import dev.vmmkit.driver.DeviceBytes;

import java.util.Optional;

/**
 * What {@code vmmkit replay} runs on: an open driver that makes a fresh allocator for each replay
 * (warm-up runs included) and is closed when the command ends.
 */
public interface ReplayBackend extends AutoCloseable {

    /** The driver's short name for messages: "host" or "cuda". */
    String driverName();

    /** A new allocator on this driver, with nothing allocated and its counters at zero. */
    ReplayTarget newTarget();

    /** Bytes of one physical page of the allocator (its chunk size), for the report's address map. */
    default long pageBytes() {
        return 2L << 20;
    }

    /**
     * Where the last replay's time in the driver went, by kind of call (one line), when the backend
     * times its driver ({@code VMM_LOG=info}); empty otherwise.
     */
    default String driverTime() {
        return "";
    }

    /** How the host reaches allocated bytes, for {@code --verify}; empty when it cannot. */
    Optional<DeviceBytes> deviceBytes();

    @Override
    void close();
}
