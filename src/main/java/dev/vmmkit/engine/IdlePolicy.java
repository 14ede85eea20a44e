package dev.vmmkit.engine;

/**
 * What the host does with an idle model when device memory runs short ({@code --idle-policy}):
 * unload it, or pause it (its device memory given back, its contents kept in host memory, so the
 * next request wakes it without loading the model file again; engines in worker processes only).
 */
public enum IdlePolicy {
    EVICT, PAUSE;

    /** {@code evict} or {@code pause}, as {@code --idle-policy} spells them. */
    public static IdlePolicy parse(String text) {
        return switch (text.trim().toLowerCase(java.util.Locale.ROOT)) {
            case "evict" -> EVICT;
            case "pause" -> PAUSE;
            default -> throw new IllegalArgumentException("--idle-policy '" + text + "' is not one of evict, pause");
        };
    }
}
