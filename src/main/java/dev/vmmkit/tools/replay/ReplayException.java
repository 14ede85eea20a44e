package dev.vmmkit.tools.replay;

/**
 * A replay that could not go on: the allocator failed a request of the trace, or {@code --verify}
 * found an allocation's bytes changed while it was live. The message names the trace and line.
 */
public final class ReplayException extends RuntimeException {

    public ReplayException(String message) {
        super(message);
    }

    public ReplayException(String message, Throwable cause) {
        super(message, cause);
    }
}
