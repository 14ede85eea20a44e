package dev.vmmkit.core;

import java.util.List;

/**
 * The memory tags of an allocator: what pause and resume did.
 *
 * @param pausedBytes     physical bytes given back by paused tags now
 * @param hostBytesKept pinned host memory ready for the next pause's copies: pinned ahead, or kept
 *                      by a resume (freed by {@link VmmManager#freeKeptHostMemory} or at close)
 * @param hostBytesPinned every byte of pinned host memory held for tags now: ready, holding the
 *                      contents of paused tags, or under a copy
 * @param hostBytesPinnedAhead bytes pinned in the background while tags were allocated, in all
 * @param tags          each tag's figures, in the order the tags were first used
 */
public record TagStats(long pausedBytes, long hostBytesKept, long hostBytesPinned, long hostBytesPinnedAhead,
                       List<Tag> tags) {
    public static final TagStats NONE = new TagStats(0, 0, 0, 0, List.of());

    public TagStats {
        tags = List.copyOf(tags);
    }

    /**
     * One tag.
     *
     * @param name            the tag
     * @param keepContents    whether a pause keeps the contents (the tag's latest setting)
     * @param paused          true while any of its memory is given back
     * @param liveBytes       bytes requested by its live allocations
     * @param pausedBytes     physical bytes it has given back now
     * @param pauses          pauses completed
     * @param resumes         resumes completed
     * @param pauseNanos      time spent in completed pauses
     * @param resumeNanos     time spent in completed resumes
     * @param lastPauseNanos  the latest completed pause's time
     * @param lastResumeNanos the latest completed resume's time
     * @param keptBytes       bytes copied to host memory by the latest completed pause
     * @param failures        pauses and resumes that failed partway
     */
    public record Tag(String name, boolean keepContents, boolean paused, long liveBytes, long pausedBytes, long pauses,
                      long resumes, long pauseNanos, long resumeNanos, long lastPauseNanos, long lastResumeNanos,
                      long keptBytes, long failures) {
    }
}
