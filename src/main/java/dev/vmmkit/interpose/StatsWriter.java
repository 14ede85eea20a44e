package dev.vmmkit.interpose;

import dev.vmmkit.core.AllocatorStats;
import dev.vmmkit.core.TagStats;
import dev.vmmkit.core.ZeroCopyStats;
import dev.vmmkit.driver.DeviceSet;
import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.trace.AtomicFile;
import dev.vmmkit.trace.RequestLedger;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.IntFunction;

/**
 * The stats file of {@code vmmkit run --stats}: one JSON object with the keys {@code mode},
 * {@code complete}, {@code allocs}, {@code frees}, {@code passthrough_calls}, {@code peak_live_bytes},
 * {@code peak_reserved_bytes}, {@code fragmentation_ratio}, {@code zero_copy}, {@code profile} and {@code devices}. Written by hand (no
 * JSON library), so the exit path loads nothing new, and always whole (through a temporary file and a
 * move).
 *
 * <p>In vmm mode the top-level figures are the allocators' summed over devices (the peaks are then
 * an upper bound), and {@code devices} has one object per device that had an allocator:
 * {@code device}, {@code allocs}, {@code frees}, {@code live_bytes}, {@code peak_live_bytes},
 * {@code peak_reserved_bytes}, {@code peers} (the devices granted peer access to its memory),
 * {@code peak_hint_bytes} (the allocator's peak hint, from VMM_PEAK_HINT or the peak profile; 0: none),
 * {@code cache_hits} and {@code cache_misses} (allocations served from mapped free memory, and the
 * others), {@code free_waits_given_up} (requests past the budget that gave up waiting for memory
 * freed by cudaFree, the device still busy, and took other memory), and {@code driver_calls} (calls by kind, e.g. {@code {"create":3,"map":3,...}}: a program
 * whose allocations all hit the cache shows none after its warm-up). In
 * monitor mode the memory belongs to the real runtime, whose reservations vmmkit cannot see:
 * {@code peak_reserved_bytes} and {@code fragmentation_ratio} are {@code null} and {@code devices}
 * is empty. {@code passthrough_calls} counts allocation and free calls served by the real runtime.
 *
 * <p>{@code zero_copy} is {@code {"remaps":N,"bytes":N,"copies_fallen_back":N}}: device-to-device
 * copies (VMM_ZERO_COPY=1) and {@code vmmkit_realloc} moves done by remapping pages, the bytes they
 * did not copy, and copies between two vmmkit allocations that stayed copies (summed over devices;
 * all zero in monitor mode).
 *
 * <p>{@code profile} is the program's peak profile ({@link PeakProfileUse}): {@code {"file":PATH,
 * "read":B,"used":B,"saved":B,"saved_peaks":[{"device":N,"bytes":N}...]}}, whether a usable profile
 * was there, whether any device's hint came from it, whether this run saved its peaks there and
 * which; {@code null} when profiles are off, in monitor mode, and in the files written before the exit.
 *
 * <p>{@code complete} is false in the file written when vmmkit starts in the program: it stays so,
 * with every figure {@code null}, when the program ends without running its exit handlers (killed
 * by a signal, {@code _exit}, a crash). A program that never calls CUDA never starts vmmkit; then
 * {@code vmmkit run} writes the file itself, complete, with zero counts.
 *
 * <p>This is one process's file. Under {@code vmmkit run} each process of the program writes its
 * own ({@link RunParts}), and {@code vmmkit run} puts them together when the program ends.
 */
public final class StatsWriter {

    private StatsWriter() {
    }

    /** The figures of one device: its allocator's stats and its granted peers (a device bit set). */
    record DeviceFigures(int device, AllocatorStats stats, long peers) {
    }

    static String vmmJson(List<DeviceFigures> devices, long passthroughCalls, PeakProfileUse profile) {
        return vmmJson(devices, passthroughCalls, profile, device -> null);
    }

    /**
     * That, with each device's {@code not_served_bytes}: the highest device memory in use beyond
     * vmmkit's and other processes' ({@link NotServedWatch}), null where it was not measured.
     */
    static String vmmJson(List<DeviceFigures> devices, long passthroughCalls, PeakProfileUse profile,
                          IntFunction<NotServedWatch.Peak> notServed) {
        long allocs = 0, frees = 0, peakLive = 0, peakReserved = 0, remaps = 0, remappedBytes = 0, fellBack = 0;
        StringBuilder each = new StringBuilder();
        for (DeviceFigures d : devices) {
            AllocatorStats s = d.stats();
            allocs += s.allocations();
            frees += s.frees();
            peakLive += s.peakLiveBytes();
            peakReserved += s.peakReservedBytes();
            remaps += s.zeroCopy().remaps();
            remappedBytes += s.zeroCopy().bytes();
            fellBack += s.zeroCopy().copiesFallenBack();
            if (!each.isEmpty()) each.append(',');
            each.append("{\"device\":").append(d.device()).append(",\"allocs\":").append(s.allocations())
                    .append(",\"frees\":").append(s.frees()).append(",\"live_bytes\":").append(s.liveBytes())
                    .append(",\"peak_live_bytes\":").append(s.peakLiveBytes())
                    .append(",\"peak_reserved_bytes\":").append(s.peakReservedBytes())
                    .append(",\"peers\":").append(DeviceSet.toString(d.peers()).replace('{', '[').replace('}', ']'))
                    .append(",\"peak_hint_bytes\":").append(profile.hintOf(d.device()))
                    .append(",\"cache_hits\":").append(s.cacheHits())
                    .append(",\"cache_misses\":").append(s.cacheMisses())
                    .append(",\"free_waits_given_up\":").append(s.freeWaitsGivenUp())
                    .append(",\"driver_calls\":");
            appendDriverCalls(each, s.driverCalls());
            NotServedWatch.Peak outside = notServed.apply(d.device());
            each.append(",\"not_served_bytes\":").append(outside == null ? "null" : Long.toString(outside.outsideBytes()));
            appendTags(each, s.tags());
            each.append('}');
        }
        double ratio = peakLive == 0 ? 0.0 : (double) peakReserved / peakLive;
        return json("vmm", true, allocs, frees, passthroughCalls, peakLive,
                Long.toString(peakReserved), String.format(Locale.ROOT, "%.6f", ratio),
                zeroCopyJson(new ZeroCopyStats(remaps, remappedBytes, fellBack)), profile.statsJson(), each.toString());
    }

    /** Memory tags: {@code "paused_bytes"}, the pinned host memory held for them, and per tag its pauses and resumes (times in microseconds). */
    private static void appendTags(StringBuilder json, TagStats tags) {
        json.append(",\"paused_bytes\":").append(tags.pausedBytes())
                .append(",\"host_bytes_pinned\":").append(tags.hostBytesPinned())
                .append(",\"host_bytes_kept\":").append(tags.hostBytesKept())
                .append(",\"host_bytes_pinned_ahead\":").append(tags.hostBytesPinnedAhead()).append(",\"tags\":[");
        boolean first = true;
        for (TagStats.Tag t : tags.tags()) {
            if (!first) json.append(',');
            first = false;
            json.append("{\"tag\":\"").append(escape(t.name())).append("\",\"keep_contents\":").append(t.keepContents())
                    .append(",\"paused\":").append(t.paused()).append(",\"live_bytes\":").append(t.liveBytes())
                    .append(",\"paused_bytes\":").append(t.pausedBytes()).append(",\"pauses\":").append(t.pauses())
                    .append(",\"resumes\":").append(t.resumes()).append(",\"pause_us\":").append(t.pauseNanos() / 1000)
                    .append(",\"resume_us\":").append(t.resumeNanos() / 1000)
                    .append(",\"last_pause_us\":").append(t.lastPauseNanos() / 1000)
                    .append(",\"last_resume_us\":").append(t.lastResumeNanos() / 1000)
                    .append(",\"kept_bytes\":").append(t.keptBytes()).append(",\"failures\":").append(t.failures())
                    .append('}');
        }
        json.append(']');
    }

    private static void appendDriverCalls(StringBuilder json, Map<DriverCall, Long> calls) {
        json.append('{');
        boolean first = true;
        for (DriverCall call : DriverCall.values()) {
            long count = calls.getOrDefault(call, 0L);
            if (count == 0) continue;
            if (!first) json.append(',');
            json.append('"').append(call.key()).append("\":").append(count);
            first = false;
        }
        json.append('}');
    }

    static String monitorJson(RequestLedger ledger, long passthroughCalls) {
        return json("monitor", true, ledger.allocations(), ledger.frees(), passthroughCalls, ledger.peakLiveBytes(),
                "null", "null", zeroCopyJson(ZeroCopyStats.NONE), "null", "");
    }

    /** The file of a program that made no CUDA allocation call: zero counts. */
    public static String noCallsJson(boolean monitorMode) {
        return monitorMode ? monitorJson(new RequestLedger(), 0) : vmmJson(List.of(), 0, PeakProfileUse.NONE);
    }

    /** The file written when vmmkit starts in the program, replaced by the figures at its exit. */
    static String unfinishedJson(boolean monitorMode) {
        return "{\"mode\":\"" + (monitorMode ? "monitor" : "vmm") + "\",\"complete\":false,\"allocs\":null,"
                + "\"frees\":null,\"passthrough_calls\":null,\"peak_live_bytes\":null,"
                + "\"peak_reserved_bytes\":null,\"fragmentation_ratio\":null,\"zero_copy\":null,\"profile\":null,\"devices\":[]}\n";
    }

    private static String json(String mode, boolean complete, long allocs, long frees, long passthrough,
                               long peakLive, String peakReserved, String ratio, String zeroCopy, String profile,
                               String devices) {
        return "{\"mode\":\"" + mode + "\",\"complete\":" + complete + ",\"allocs\":" + allocs
                + ",\"frees\":" + frees + ",\"passthrough_calls\":" + passthrough
                + ",\"peak_live_bytes\":" + peakLive + ",\"peak_reserved_bytes\":" + peakReserved
                + ",\"fragmentation_ratio\":" + ratio + ",\"zero_copy\":" + zeroCopy + ",\"profile\":" + profile
                + ",\"devices\":[" + devices + "]}\n";
    }

    private static String zeroCopyJson(ZeroCopyStats z) {
        return "{\"remaps\":" + z.remaps() + ",\"bytes\":" + z.bytes() + ",\"copies_fallen_back\":" + z.copiesFallenBack() + "}";
    }

    /** {@code text} as the inside of a JSON string: quotes, backslashes and control characters escaped. */
    static String escape(String text) {
        StringBuilder out = new StringBuilder(text.length());
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') out.append('\\').append(c);
            else if (c < 0x20) out.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
            else out.append(c);
        }
        return out.toString();
    }

    /** Writes {@code json} to {@code file} whole. */
    public static void write(Path file, String json) throws IOException {
        AtomicFile.writeString(file, json);
    }
}
