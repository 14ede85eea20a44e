package dev.vmmkit.tools.run;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * One stats file from the files of a run's processes ({@code dev.vmmkit.interpose.RunParts}): a
 * process's own file is {@code dev.vmmkit.interpose.StatsWriter}'s. A process that served and
 * recorded nothing (a launcher such as torchrun, which starts vmmkit and allocates nothing) is left
 * out while another did something, so a program of one working process gets that process's file as
 * it is. Several get one file with the same keys: the counts, peaks and copies summed (each peak is
 * its own process's, so their sum is an upper bound, as the sum over devices already is), the ratio
 * of the sums, {@code complete} only when every process finished, the peak profile's figures of
 * every process ({@link #profile}), each device's object once per process with its {@code pid}
 * first, and
 * {@code processes}: per process its {@code pid}, {@code complete} and top-level counts.
 */
final class MergedStats {
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
    private static final List<String> SUMMED = List.of("allocs", "frees", "passthrough_calls", "peak_live_bytes",
            "peak_reserved_bytes");

    private static final Comparator<ObjectNode> BY_DEVICE_THEN_PID = Comparator
            .<ObjectNode>comparingInt(figures -> figures.path("device").asInt())
            .thenComparingLong(figures -> figures.path("pid").asLong());

    /** One process's stats file. */
    record Part(long pid, JsonNode stats) {
    }

    private MergedStats() {
    }

    /** The run's stats from its processes' (at least one). */
    static JsonNode of(List<Part> parts) {
        if (parts.isEmpty()) throw new IllegalArgumentException("no process wrote stats");
        List<Part> sorted = new ArrayList<>(parts);
        sorted.sort(Comparator.comparingLong(Part::pid));
        List<Part> working = sorted.stream().filter(part -> !didNothing(part.stats())).toList();
        if (working.isEmpty()) return sorted.getFirst().stats();
        if (working.size() == 1) return working.getFirst().stats();
        return merged(working);
    }

    /** A finished process with no allocation, free or passed-through call. */
    private static boolean didNothing(JsonNode stats) {
        if (!stats.path("complete").asBoolean(false)) return false;
        for (String key : List.of("allocs", "frees", "passthrough_calls")) if (stats.path(key).asLong(0) != 0) return false;
        return true;
    }

    private static ObjectNode merged(List<Part> parts) {
        ObjectNode out = NODES.objectNode();
        out.set("mode", parts.getFirst().stats().get("mode"));
        out.put("complete", parts.stream().allMatch(part -> part.stats().path("complete").asBoolean(false)));
        for (String key : SUMMED) out.set(key, sum(parts, key));
        JsonNode live = out.get("peak_live_bytes"), reserved = out.get("peak_reserved_bytes");
        if (reserved.isNull()) {
            out.putNull("fragmentation_ratio");
        } else {
            out.put("fragmentation_ratio", live.asLong() == 0 ? 0.0 : reserved.asDouble() / live.asDouble());
        }
        out.set("zero_copy", zeroCopy(parts));
        out.set("profile", profile(parts));
        out.set("devices", devices(parts));
        out.set("processes", processes(parts));
        return out;
    }

    /** The sum of the processes' figures under {@code key}; null when none has one. */
    private static JsonNode sum(List<Part> parts, String key) {
        long total = 0;
        boolean any = false;
        for (Part part : parts) {
            JsonNode value = part.stats().get(key);
            if (value == null || !value.isNumber()) continue;
            total += value.asLong();
            any = true;
        }
        return any ? NODES.numberNode(total) : NODES.nullNode();
    }

    private static JsonNode zeroCopy(List<Part> parts) {
        ObjectNode out = NODES.objectNode();
        boolean any = false;
        for (Part part : parts) {
            JsonNode z = part.stats().get("zero_copy");
            if (z == null || !z.isObject()) continue;
            any = true;
            z.fieldNames().forEachRemaining(key -> out.put(key, out.path(key).asLong(0) + z.path(key).asLong(0)));
        }
        return any ? out : NODES.nullNode();
    }

    /**
     * The profile's file (a program's ranks share one; processes of other programs add
     * {@code files}, every file once), whether any process read, used or saved one, and every
     * saved peak with its process's pid first.
     */
    private static JsonNode profile(List<Part> parts) {
        ObjectNode out = null;
        Set<String> files = new LinkedHashSet<>();
        List<ObjectNode> peaks = new ArrayList<>();
        for (Part part : parts) {
            JsonNode profile = part.stats().get("profile");
            if (profile == null || !profile.isObject()) continue;
            if (out == null) {
                out = NODES.objectNode();
                out.set("file", profile.get("file"));
                out.put("read", false).put("used", false).put("saved", false);
            }
            if (profile.path("file").isTextual()) files.add(profile.get("file").asText());
            for (String flag : List.of("read", "used", "saved")) {
                if (profile.path(flag).asBoolean(false)) out.put(flag, true);
            }
            for (JsonNode peak : profile.path("saved_peaks")) peaks.add(withPid(part.pid(), peak));
        }
        if (out == null) return NODES.nullNode();
        if (files.size() > 1) files.forEach(out.putArray("files")::add);
        peaks.sort(BY_DEVICE_THEN_PID);
        out.set("saved_peaks", NODES.arrayNode().addAll(peaks));
        return out;
    }

    /** Each process's device objects, its pid first, by device and then pid. */
    private static ArrayNode devices(List<Part> parts) {
        List<ObjectNode> devices = new ArrayList<>();
        for (Part part : parts) for (JsonNode device : part.stats().path("devices")) devices.add(withPid(part.pid(), device));
        devices.sort(BY_DEVICE_THEN_PID);
        return NODES.arrayNode().addAll(devices);
    }

    /** {@code figures} (an object) with {@code "pid"} first. */
    private static ObjectNode withPid(long pid, JsonNode figures) {
        ObjectNode out = NODES.objectNode().put("pid", pid);
        if (figures.isObject()) out.setAll((ObjectNode) figures);
        return out;
    }

    private static ArrayNode processes(List<Part> parts) {
        ArrayNode out = NODES.arrayNode();
        for (Part part : parts) {
            ObjectNode process = out.addObject().put("pid", part.pid());
            process.set("complete", part.stats().path("complete").isBoolean() ? part.stats().get("complete") : NODES.booleanNode(false));
            for (String key : SUMMED) {
                JsonNode value = part.stats().get(key);
                process.set(key, value == null ? NODES.nullNode() : value);
            }
        }
        return out;
    }
}
