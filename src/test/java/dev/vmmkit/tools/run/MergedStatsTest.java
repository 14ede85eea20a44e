package dev.vmmkit.tools.run;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The stats file of a run from its processes' files, checked against figures worked out by hand. */
class MergedStatsTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** A finished process's file in vmm mode, one device. */
    private static JsonNode vmm(int device, long allocs, long live, long reserved, String profile) throws Exception {
        return JSON.readTree("{\"mode\":\"vmm\",\"complete\":true,\"allocs\":" + allocs + ",\"frees\":" + allocs
                + ",\"passthrough_calls\":0,\"peak_live_bytes\":" + live + ",\"peak_reserved_bytes\":" + reserved
                + ",\"fragmentation_ratio\":1.0,\"zero_copy\":{\"remaps\":1,\"bytes\":4096,\"copies_fallen_back\":2},"
                + "\"profile\":" + profile + ",\"devices\":[{\"device\":" + device + ",\"allocs\":" + allocs
                + ",\"peak_hint_bytes\":0}]}");
    }

    private static String profile(String file, boolean read, int device, long saved) {
        return "{\"file\":\"" + file + "\",\"read\":" + read + ",\"used\":" + read + ",\"saved\":true,"
                + "\"saved_peaks\":[{\"device\":" + device + ",\"bytes\":" + saved + "}]}";
    }

    private static final String LAUNCHER = "{\"mode\":\"vmm\",\"complete\":true,\"allocs\":0,\"frees\":0,"
            + "\"passthrough_calls\":0,\"peak_live_bytes\":0,\"peak_reserved_bytes\":0,\"fragmentation_ratio\":0.0,"
            + "\"zero_copy\":{\"remaps\":0,\"bytes\":0,\"copies_fallen_back\":0},\"profile\":null,\"devices\":[]}";

    @Test
    void oneWorkingProcessBesideALauncherGetsItsOwnFileAsItIs() throws Exception {
        JsonNode worker = vmm(0, 10, 1000, 1020, "null");
        JsonNode merged = MergedStats.of(List.of(new MergedStats.Part(7, JSON.readTree(LAUNCHER)),
                new MergedStats.Part(9, worker)));
        assertEquals(worker, merged);
    }

    @Test
    void aRunWhereNoProcessDidAnythingGetsTheFirstProcesssFile() throws Exception {
        JsonNode launcher = JSON.readTree(LAUNCHER);
        assertEquals(launcher, MergedStats.of(List.of(new MergedStats.Part(12, launcher), new MergedStats.Part(11, launcher))));
        assertThrows(IllegalArgumentException.class, () -> MergedStats.of(List.of()));
    }

    @Test
    void twoRanksAreSummedAndEachDeviceCarriesItsProcess() throws Exception {
        String file = "/cache/p.json";
        JsonNode merged = MergedStats.of(List.of(
                new MergedStats.Part(200, vmm(1, 30, 3000, 3300, profile(file, true, 1, 3000))),
                new MergedStats.Part(100, vmm(0, 10, 1000, 1100, profile(file, false, 0, 1000))),
                new MergedStats.Part(50, JSON.readTree(LAUNCHER))));
        assertEquals("vmm", merged.get("mode").asText());
        assertTrue(merged.get("complete").asBoolean());
        assertEquals(40, merged.get("allocs").asLong());
        assertEquals(40, merged.get("frees").asLong());
        assertEquals(4000, merged.get("peak_live_bytes").asLong());
        assertEquals(4400, merged.get("peak_reserved_bytes").asLong());
        assertEquals(1.1, merged.get("fragmentation_ratio").asDouble(), 1e-12);
        assertEquals("{\"remaps\":2,\"bytes\":8192,\"copies_fallen_back\":4}", merged.get("zero_copy").toString());
        assertEquals(JSON.readTree("[{\"pid\":100,\"device\":0,\"allocs\":10,\"peak_hint_bytes\":0},"
                + "{\"pid\":200,\"device\":1,\"allocs\":30,\"peak_hint_bytes\":0}]").toString(), merged.get("devices").toString());
        JsonNode profile = merged.get("profile");
        assertEquals(file, profile.get("file").asText());
        assertFalse(profile.has("files"), "ranks of one program share one profile file");
        assertTrue(profile.get("read").asBoolean() && profile.get("used").asBoolean() && profile.get("saved").asBoolean());
        assertEquals(JSON.readTree("[{\"pid\":100,\"device\":0,\"bytes\":1000},{\"pid\":200,\"device\":1,\"bytes\":3000}]")
                .toString(), profile.get("saved_peaks").toString());
        JsonNode processes = merged.get("processes");
        assertEquals(2, processes.size(), "the launcher did nothing");
        assertEquals(100, processes.get(0).get("pid").asLong());
        assertEquals(10, processes.get(0).get("allocs").asLong());
        assertEquals(3300, processes.get(1).get("peak_reserved_bytes").asLong());
    }

    @Test
    void programsWithProfilesOfTheirOwnNameEachFile() throws Exception {
        JsonNode merged = MergedStats.of(List.of(new MergedStats.Part(1, vmm(0, 5, 10, 20, profile("/a.json", false, 0, 10))),
                new MergedStats.Part(2, vmm(0, 6, 10, 20, profile("/b.json", false, 0, 10)))));
        assertEquals(JSON.readTree("[\"/a.json\",\"/b.json\"]").toString(), merged.get("profile").get("files").toString());
        assertFalse(merged.get("profile").get("used").asBoolean());
    }

    @Test
    void aProcessThatDidNotFinishMakesTheRunIncompleteAndAddsNoFigure() throws Exception {
        JsonNode unfinished = JSON.readTree("{\"mode\":\"vmm\",\"complete\":false,\"allocs\":null,\"frees\":null,"
                + "\"passthrough_calls\":null,\"peak_live_bytes\":null,\"peak_reserved_bytes\":null,"
                + "\"fragmentation_ratio\":null,\"zero_copy\":null,\"profile\":null,\"devices\":[]}");
        JsonNode merged = MergedStats.of(List.of(new MergedStats.Part(1, vmm(0, 5, 100, 150, "null")),
                new MergedStats.Part(2, unfinished)));
        assertFalse(merged.get("complete").asBoolean());
        assertEquals(5, merged.get("allocs").asLong());
        assertEquals(1.5, merged.get("fragmentation_ratio").asDouble(), 1e-12);
        assertTrue(merged.get("profile").isNull());
        assertFalse(merged.get("processes").get(1).get("complete").asBoolean());
        assertTrue(merged.get("processes").get(1).get("allocs").isNull());
    }

    @Test
    void monitorModeHasNoReservedBytesAndNoRatio() throws Exception {
        String monitor = "{\"mode\":\"monitor\",\"complete\":true,\"allocs\":3,\"frees\":3,\"passthrough_calls\":6,"
                + "\"peak_live_bytes\":64,\"peak_reserved_bytes\":null,\"fragmentation_ratio\":null,"
                + "\"zero_copy\":{\"remaps\":0,\"bytes\":0,\"copies_fallen_back\":0},\"profile\":null,\"devices\":[]}";
        JsonNode merged = MergedStats.of(List.of(new MergedStats.Part(1, JSON.readTree(monitor)),
                new MergedStats.Part(2, JSON.readTree(monitor))));
        assertEquals("monitor", merged.get("mode").asText());
        assertEquals(12, merged.get("passthrough_calls").asLong());
        assertEquals(128, merged.get("peak_live_bytes").asLong());
        assertTrue(merged.get("peak_reserved_bytes").isNull());
        assertTrue(merged.get("fragmentation_ratio").isNull());
        assertEquals(0, merged.get("devices").size());
    }
}
