package dev.vmmkit.core;

/**
 * A pause or resume of memory tags on one device refused, with nothing done there, because a CUDA
 * stream capture is under way in the process ({@link StreamCaptures} says why). It may be made
 * again once the capture has ended.
 */
public final class CaptureUnderwayException extends IllegalStateException {
    public CaptureUnderwayException(String call, String tag, int device) {
        super(call + " of " + (tag == null ? "every memory tag" : "memory tag '" + tag + "'") + " on device " + device
                + " refused: a CUDA stream capture is under way in this process, and the device work of a " + call
                + " would invalidate it; nothing was done on this device, call it again once the capture has ended");
    }
}
