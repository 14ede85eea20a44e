package dev.vmmkit.engine;

/**
 * Where engine instances run: each in a worker process of its own (a crash or a hang ends the
 * worker, never the host), or in the host's process (no per-call cost, for trusted plugins).
 */
public enum Isolation {
    WORKER, IN_PROCESS;

    /** {@code worker} or {@code in-process}, as {@code --isolation} spells them. */
    public static Isolation parse(String text) {
        return switch (text.trim().toLowerCase(java.util.Locale.ROOT)) {
            case "worker" -> WORKER;
            case "in-process" -> IN_PROCESS;
            default -> throw new IllegalArgumentException("--isolation '" + text + "' is not one of worker, in-process");
        };
    }
}
