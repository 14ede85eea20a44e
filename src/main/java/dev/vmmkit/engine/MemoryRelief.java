package dev.vmmkit.engine;

import java.util.Optional;

/** What the resource monitor can do about memory pressure. */
interface MemoryRelief {
    /** Gives cached, unused memory back; returns the bytes released. */
    long clearCaches();

    /** Unloads the least recently used model with nothing in flight; a line saying which, or empty. */
    Optional<String> evictLeastRecentlyUsedIdle(String reason);
}
