package dev.vmmkit.interpose;

import dev.vmmkit.core.CaptureUnderwayException;
import dev.vmmkit.core.ManagedMemoryResource;
import dev.vmmkit.core.MemoryTagControl;
import dev.vmmkit.core.TagPausedException;
import dev.vmmkit.core.TagTransitionException;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The shim's memory-tag calls ({@code vmmkit_region_begin}, {@code vmmkit_region_end}, {@code vmmkit_default_tag},
 * {@code vmmkit_pause}, {@code vmmkit_resume}) and {@code vmmkit_release_cached}, through FFM upcall stubs. As in
 * {@link InterposedCalls}, nothing throws: results are 0 or a negated CUDA runtime error.
 *
 * <p>A region tags the thread's allocations on every device ({@link ThreadTagRegions}). A pause or
 * resume reaches every device's allocator that knows the tag, or every allocator for a null tag.
 */
public final class TagCalls {
    private TagCalls() {
    }

    /**
     * Opens a region of the tag at C string {@code tagAddress} ({@code tagLength} bytes, the shim
     * checked it; 0: a region of no tag); keep contents when {@code keep} is not 0.
     */
    public static int regionBegin(long tagAddress, int tagLength, int keep, int device) {
        try {
            String tag = tagAddress == 0 ? null : cString(tagAddress, tagLength);
            MemoryTagControl tags = control(device);
            if (tags == null) return -InterposedCalls.CUDA_ERROR_INVALID_VALUE;
            InterposedCalls.session().tagRegions.begin(tag, keep != 0, device, tags);
            return 0;
        } catch (IllegalArgumentException e) {
            InterposeLog.warnOnce("region-" + e.getMessage(), e.getMessage(), null);
            return -InterposedCalls.CUDA_ERROR_INVALID_VALUE;
        } catch (Throwable e) {
            InterposeLog.warnOnce("region", "vmmkit_region_begin failed inside vmmkit", e);
            return -InterposedCalls.CUDA_ERROR_UNKNOWN;
        }
    }

    /**
     * Makes the tag at C string {@code tagAddress} ({@code tagLength} bytes; 0: none) the one that
     * allocations outside every region carry, on every device's allocator, those made later too.
     */
    public static int defaultTag(long tagAddress, int tagLength, int keep) {
        try {
            String tag = tagAddress == 0 ? null : cString(tagAddress, tagLength);
            InterposedCalls.session().managers.setDefaultTag(tag, keep != 0);
            return 0;
        } catch (IllegalArgumentException e) {
            System.err.println("vmmkit: vmmkit_default_tag: " + e.getMessage());
            return -InterposedCalls.CUDA_ERROR_INVALID_VALUE;
        } catch (Throwable e) {
            InterposeLog.warnOnce("default-tag", "vmmkit_default_tag failed inside vmmkit", e);
            return -InterposedCalls.CUDA_ERROR_UNKNOWN;
        }
    }

    /** Closes this thread's innermost region, on every device's allocator it reached ({@code device}: the current one). */
    public static int regionEnd(int device) {
        try {
            boolean closed = InterposedCalls.session().tagRegions.end(TagCalls::control);
            return closed ? 0 : -InterposedCalls.CUDA_ERROR_INVALID_VALUE; // else no region open on this thread
        } catch (Throwable e) {
            InterposeLog.warnOnce("region-end", "vmmkit_region_end failed inside vmmkit", e);
            return -InterposedCalls.CUDA_ERROR_UNKNOWN;
        }
    }

    /**
     * Pauses the tag at C string {@code tagAddress} of {@code tagLength} bytes (every tag when 0);
     * {@code keep} 0 or 1 first sets whether it keeps its contents, on every device's allocator
     * (vmmkit_pause_keeping; the shim passes a tag then), -1 leaves the setting as it is.
     */
    public static int pause(long tagAddress, int tagLength, int device, int keep) {
        return transition(tagAddress, tagLength, true, keep);
    }

    /** Resumes the tag at C string {@code tagAddress} of {@code tagLength} bytes (every tag when 0). */
    public static int resume(long tagAddress, int tagLength, int device) {
        return transition(tagAddress, tagLength, false, KEEP_AS_SET);
    }

    /** {@link #pause}'s {@code keep} that leaves the tag's setting as its regions set it. */
    static final int KEEP_AS_SET = -1;

    private static int transition(long tagAddress, int tagLength, boolean pause, int keep) {
        try {
            String tag = tagAddress == 0 ? null : cString(tagAddress, tagLength);
            List<MemoryTagControl> targets = new ArrayList<>();
            for (ManagedMemoryResource r : InterposedCalls.session().managers.existing()) {
                MemoryTagControl tags = r.tagControl();
                if (tags != null && (tag == null || tags.knowsTag(tag))) targets.add(tags);
            }
            // The empty name is TagCallWarmUp's (the shim never passes one): it finds no tag and goes
            // on along a program's path, so the code compiled for it is the code a program's call runs.
            if (tag != null && targets.isEmpty() && !tag.isEmpty()) {
                System.err.println("vmmkit: " + (pause ? "vmmkit_pause" : "vmmkit_resume") + ": unknown memory tag '" + tag
                        + "' (no vmmkit_region_begin of that name)");
                return -InterposedCalls.CUDA_ERROR_INVALID_VALUE;
            }
            FirstCalls first = InterposedCalls.session().firstCalls; // null unless VMM_LOG=info: Kind stays unloaded
            FirstCalls.Kind kind = first == null ? null : pause ? FirstCalls.Kind.PAUSE : FirstCalls.Kind.RESUME;
            boolean timed = first != null && !targets.isEmpty() && first.wants(kind);
            if (keep != KEEP_AS_SET) {
                if (tag == null) return -InterposedCalls.CUDA_ERROR_INVALID_VALUE; // the setting is each tag's
                for (MemoryTagControl tags : targets) tags.keepContents(tag, keep != 0);
            }
            if (timed) first.begin(kind, -1);
            try {
                for (MemoryTagControl tags : targets) {
                    if (pause) tags.pause(tag);
                    else tags.resume(tag);
                }
            } finally {
                if (timed) first.end(kind, 0);
            }
            return 0;
        } catch (TagTransitionException e) {
            System.err.println("vmmkit: " + e.getMessage());
            return -(e.isOutOfMemory() ? InterposedCalls.CUDA_ERROR_MEMORY_ALLOCATION : InterposedCalls.CUDA_ERROR_UNKNOWN);
        } catch (CaptureUnderwayException e) {
            System.err.println("vmmkit: " + e.getMessage());
            return -InterposedCalls.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        } catch (IllegalArgumentException e) {
            System.err.println("vmmkit: " + e.getMessage());
            return -InterposedCalls.CUDA_ERROR_INVALID_VALUE;
        } catch (Throwable e) {
            InterposeLog.warnOnce("pause", (pause ? "vmmkit_pause" : "vmmkit_resume") + " failed inside vmmkit", e);
            return -InterposedCalls.CUDA_ERROR_UNKNOWN;
        }
    }

    /**
     * Gives every device's cached memory back to the driver ({@link ManagedMemoryResource#releaseCachedMemory})
     * and writes the bytes given back to {@code out[0]}.
     */
    @SuppressWarnings("restricted") // one int64_t the caller passed
    public static int releaseCached(long out) {
        try {
            long released = 0;
            for (ManagedMemoryResource r : InterposedCalls.session().managers.existing()) released += r.releaseCachedMemory();
            MemorySegment.ofAddress(out).reinterpret(8).set(ValueLayout.JAVA_LONG, 0, released);
            return 0;
        } catch (Throwable e) {
            InterposeLog.warnOnce("release-cached", "vmmkit_release_cached failed inside vmmkit", e);
            return -InterposedCalls.CUDA_ERROR_UNKNOWN;
        }
    }

    /**
     * Writes the pinned host memory held for tags, over every device's allocator, to
     * {@code out[0]}, and what of it is ready for the next pause (pinned ahead or kept) to
     * {@code out[1]}.
     */
    @SuppressWarnings("restricted") // two int64_t the caller passed
    public static int hostMemory(long out) {
        try {
            long pinned = 0;
            long ready = 0;
            for (ManagedMemoryResource r : InterposedCalls.session().managers.existing()) {
                MemoryTagControl tags = r.tagControl();
                if (tags == null) continue;
                pinned += tags.hostBytesPinned();
                ready += tags.hostBytesKept();
            }
            MemorySegment values = MemorySegment.ofAddress(out).reinterpret(16);
            values.set(ValueLayout.JAVA_LONG, 0, pinned);
            values.set(ValueLayout.JAVA_LONG, 8, ready);
            return 0;
        } catch (Throwable e) {
            InterposeLog.warnOnce("host-memory", "vmmkit_host_memory failed inside vmmkit", e);
            return -InterposedCalls.CUDA_ERROR_UNKNOWN;
        }
    }

    /** An allocation into a paused tag: said once per tag, on standard error. */
    static void refused(TagPausedException e) {
        InterposeLog.warnOnce("paused-" + e.tag(), e.getMessage(), null);
    }

    private static MemoryTagControl control(int device) {
        ManagedMemoryResource resource = InterposedCalls.session().managers.forDevice(device);
        return resource == null ? null : resource.tagControl();
    }

    /** The whole address space, made once: names are copied out of it with no segment made per call. */
    @SuppressWarnings("restricted")
    private static final MemorySegment EVERYWHERE = MemorySegment.NULL.reinterpret(Long.MAX_VALUE);

    /**
     * The UTF-8 string of {@code length} bytes at {@code address} (the caller passed a string of that
     * length), copied in one call: looking for its end byte by byte, or making a segment for it
     * ({@code reinterpret}, a restricted, caller-sensitive method) took 30-150 us of a first pause on an
     * H200.
     */
    private static String cString(long address, int length) {
        byte[] bytes = new byte[length];
        MemorySegment.copy(EVERYWHERE, ValueLayout.JAVA_BYTE, address, bytes, 0, length);
        return new String(bytes, StandardCharsets.UTF_8);
    }
}
