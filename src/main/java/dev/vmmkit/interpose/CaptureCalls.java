package dev.vmmkit.interpose;

import dev.vmmkit.core.StreamCaptures;

/**
 * The shim's report of CUDA stream captures (src/main/c/stream_capture.c), through an FFM upcall
 * stub: every device's allocator holds its device synchronisations back while one is under way
 * ({@link StreamCaptures}). One count per allocator rather than per device: a capture is short, and
 * a stream's device is not worth a driver call at its begin. Nothing throws.
 */
public final class CaptureCalls {
    /** Set at the first capture, so that VMM_LOG=info says once that captures are seen. */
    private static volatile boolean seen;

    private CaptureCalls() {
    }

    /**
     * {@code began} 1: a capture is about to begin; returns once no allocator synchronises the
     * device. 0: a capture ended, or failed to begin.
     */
    public static void captureChanged(int began) {
        try {
            if (began != 0 && !seen) {
                seen = true;
                InterposeLog.info("a CUDA stream capture began: memory freed with cudaFree is synchronised"
                        + " before each capture and not during one");
            }
            InterposedCalls.session().managers.captureChanged(began != 0);
        } catch (Throwable e) {
            InterposeLog.warnOnce("capture", "a stream capture's " + (began != 0 ? "begin" : "end")
                    + " could not be told to vmmkit", e);
        }
    }
}
