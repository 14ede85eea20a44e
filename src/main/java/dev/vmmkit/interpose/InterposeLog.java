package dev.vmmkit.interpose;

import dev.vmmkit.driver.VmmLog;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Messages of the interposer, on stderr only: the host program's stdout stays its own. Warnings
 * are printed once per kind, so a failing hot path cannot flood the terminal.
 * {@code VMM_LOG=info} (or {@code debug}) adds progress messages (see {@link VmmLog}).
 */
final class InterposeLog {
    private static final Set<String> warned = ConcurrentHashMap.newKeySet();

    private InterposeLog() {
    }

    static void info(String message) {
        if (VmmLog.isInfo()) System.err.println("vmmkit: " + message);
    }

    /** Prints {@code message} the first time {@code kind} fails; later failures of that kind are silent. */
    static void warnOnce(String kind, String message, Throwable cause) {
        try {
            if (warned.add(kind)) {
                System.err.println("vmmkit: " + message + (cause == null ? "" : ": " + cause));
                if (VmmLog.isInfo() && cause != null) cause.printStackTrace();
            }
        } catch (Throwable ignored) {
            // Logging must never be the reason a call into native code throws.
        }
    }
}
