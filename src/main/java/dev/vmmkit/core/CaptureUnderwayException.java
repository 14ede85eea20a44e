package dev.vmmkit.core;

/**
 * A pause or resume of memory tags refused because a CUDA stream capture (a CUDA graph being
 * recorded) is under way on the device. A pause must synchronise the device before it unmaps, and a
 * device synchronisation invalidates the capture; a resume copies kept contents back through streams
 * and waits for them, calls CUDA counts as unsafe beside a capture. Nothing was done: the tags are as
 * they were, and the call may be made again once the capture has ended.
 */
public final class CaptureUnderwayException extends IllegalStateException {
    public CaptureUnderwayException(String call, String tag, int device) {
        super(call + " of " + (tag == null ? "every memory tag" : "memory tag '" + tag + "'") + " on device " + device
                + " refused: a CUDA stream capture is under way there, which the device synchronisation it needs would"
                + " invalidate; call it before the capture begins or after it ends");
    }
}
