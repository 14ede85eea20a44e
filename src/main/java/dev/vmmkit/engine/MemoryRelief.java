package dev.vmmkit.engine;

import java.util.Optional;

/** What the resource monitor can do about memory pressure. */
interface MemoryRelief {
    /** Gives cached, unused memory back; returns the bytes released. */
    long clearCaches();

    /**
     * Unloads, or pauses (under {@code --idle-policy pause}), the least recently used model with
     * nothing in flight; a line saying which and what was done, or empty when no model is idle.
     */
    Optional<String> relieveLeastRecentlyUsedIdle(String reason);
}
