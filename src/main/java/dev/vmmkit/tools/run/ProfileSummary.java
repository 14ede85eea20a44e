package dev.vmmkit.tools.run;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.vmmkit.core.ByteSize;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * The line {@code vmmkit run} prints about the program's peak profile, from the run's stats file:
 * which file, whether its peaks were the allocators' hints (and how large), whether this run's peaks
 * were saved, e.g. {@code peak profile ~/.cache/vmmkit/profiles/5f88cd41ccdac8e9.json: used as the
 * peak hint (device 0: 32 MiB); saved this run's peak (device 0: 32 MiB)}. "read, not used": VMM_PEAK_HINT
 * was set, or the profile's peak was above the device's memory. A run of several processes names each
 * device with its process ({@link MergedStats}). Empty when the stats file has no profile (profiles off, monitor mode, a program that
 * made no CUDA call or was killed).
 */
public final class ProfileSummary {
    private static final ObjectMapper JSON = new ObjectMapper();

    private ProfileSummary() {
    }

    public static Optional<String> of(Path statsFile, int exitStatus) {
        JsonNode stats;
        try {
            stats = JSON.readTree(statsFile.toFile());
        } catch (IOException | RuntimeException e) {
            return Optional.empty();
        }
        JsonNode profile = stats == null ? null : stats.get("profile");
        if (profile == null || !profile.isObject()) return Optional.empty();
        List<String> hints = new ArrayList<>(), peaks = new ArrayList<>();
        for (JsonNode device : stats.path("devices")) {
            long hint = device.path("peak_hint_bytes").asLong();
            if (hint > 0) hints.add(deviceOf(device) + ": " + ByteSize.format(hint));
        }
        for (JsonNode peak : profile.path("saved_peaks")) {
            peaks.add(deviceOf(peak) + ": " + ByteSize.format(peak.path("bytes").asLong()));
        }
        String used = profile.path("used").asBoolean() ? "used as the peak hint (" + String.join(", ", hints) + ")"
                : profile.path("read").asBoolean() ? "read, not used" : "none yet";
        String saved = profile.path("saved").asBoolean() ? "saved this run's peak (" + String.join(", ", peaks) + ")"
                : exitStatus != 0 ? "not saved (exit status " + exitStatus + ")" : "not saved";
        List<String> files = new ArrayList<>();
        profile.path("files").forEach(file -> files.add(file.asText()));
        String where = files.isEmpty() ? "peak profile " + profile.path("file").asText() : "peak profiles " + String.join(", ", files);
        return Optional.of(where + ": " + used + "; " + saved);
    }

    /** "device 0", or "device 0 of pid 4711" in the file of a run of several processes. */
    private static String deviceOf(JsonNode figures) {
        String device = "device " + figures.path("device").asInt();
        return figures.has("pid") ? device + " of pid " + figures.path("pid").asLong() : device;
    }
}
