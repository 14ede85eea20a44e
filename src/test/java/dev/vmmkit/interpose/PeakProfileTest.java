package dev.vmmkit.interpose;

import dev.vmmkit.core.AllocatorStats;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The profile file, where it lives, and how a run uses it; the real processes are in InterposeEndToEndTest. */
class PeakProfileTest {
    private static final ProgramIdentity TRAIN = new ProgramIdentity("/usr/bin/python3.12", List.of("train.py", "--batch", "32"), "/home/me");

    @TempDir
    Path dir;

    private static PeakProfile profile(ProgramIdentity program, PeakProfile.DeviceFigures... devices) {
        return new PeakProfile("2026-11-23T15:40:00Z", program, List.of(devices));
    }

    private static PeakProfile.DeviceFigures device(int device, long peak) {
        return new PeakProfile.DeviceFigures(device, peak, peak + peak / 50, 1000);
    }

    @Test
    void aProfileReadsBackAsWritten() throws IOException {
        PeakProfile written = profile(new ProgramIdentity("/bin/a \"b\"", List.of("x\ty", ""), "/d\\e", List.of("CUDA_VISIBLE_DEVICES=1")),
                device(0, 5L << 30), device(3, 7));
        assertEquals(written, PeakProfile.parse(written.toJson()));
    }

    @Test
    void keysItDoesNotKnowAreSkipped() throws IOException {
        String text = profile(TRAIN, device(0, 100)).toJson()
                .replace("\"devices\":[{", "\"future\":{\"a\":[1,2]},\"devices\":[{\"more\":[{}],");
        assertEquals(100, PeakProfile.parse(text).device(0).peakLiveBytes());
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "garbage", "{\"format\":\"vmmkit-peak-profile\",\"version\":1,\"devi", "[]",
            "{\"format\":\"vmmkit-peak-profile\",\"version\":2,\"program\":{},\"devices\":[]}",
            "{\"format\":\"something-else\",\"version\":1}",
            "{\"format\":\"vmmkit-peak-profile\",\"version\":1,\"program\":{\"executable\":\"/a\",\"arguments\":[],\"directory\":\"/\"},"
                    + "\"devices\":[{\"device\":0,\"peak_live_bytes\":-5}]}",
            "{\"format\":\"vmmkit-peak-profile\",\"version\":1,\"program\":{\"executable\":\"/a\",\"arguments\":[],\"directory\":\"/\"},"
                    + "\"devices\":[{\"device\":99,\"peak_live_bytes\":5}]}",
            "{\"format\":\"vmmkit-peak-profile\",\"version\":1,\"program\":{\"executable\":\"/a\",\"arguments\":[],\"directory\":\"/\"},"
                    + "\"devices\":[{\"device\":0,\"peak_live_bytes\":99999999999999999999999}]}"})
    void aCorruptTruncatedOrForeignFileIsRefusedWithAReason(String text) {
        IOException e = assertThrows(IOException.class, () -> PeakProfile.parse(text));
        assertFalse(e.getMessage().isBlank());
    }

    @Test
    void theKeyTellsProgramsApartByExecutableArgumentsAndFolder() {
        String key = TRAIN.key();
        assertEquals(16, key.length());
        assertEquals(key, new ProgramIdentity(TRAIN.executable(), List.of("train.py", "--batch", "32"), "/home/me").key());
        assertNotEquals(key, new ProgramIdentity(TRAIN.executable(), List.of("train.py", "--batch", "64"), "/home/me").key());
        assertNotEquals(key, new ProgramIdentity(TRAIN.executable(), TRAIN.arguments(), "/home/other").key());
        assertNotEquals(key, new ProgramIdentity("/usr/bin/python3.13", TRAIN.arguments(), "/home/me").key());
        assertNotEquals(new ProgramIdentity("/a", List.of("b c"), "/").key(), new ProgramIdentity("/a", List.of("b", "c"), "/").key());
        assertNotEquals(key, new ProgramIdentity(TRAIN.executable(), TRAIN.arguments(), TRAIN.directory(),
                List.of("PYTORCH_NO_CUDA_MEMORY_CACHING=1")).key(), "PyTorch's cache off: another program");
        assertNotEquals(new ProgramIdentity("/a", List.of("X=1"), "/").key(), new ProgramIdentity("/a", List.of(), "/", List.of("X=1")).key());
    }

    @Test
    void thisProcessHasAnIdentity() throws IOException {
        ProgramIdentity self = ProgramIdentity.current(Map.of("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", "OTHER", "x"));
        assertEquals(List.of("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"), self.environment());
        assertTrue(self.executable().endsWith("java"), self::toString);
        assertEquals(Path.of("").toAbsolutePath().toRealPath().toString(), self.directory());
        assertFalse(self.arguments().isEmpty());
    }

    @Test
    void theCacheFolderFollowsTheXdgRules() {
        assertEquals(Path.of("/c/vmmkit/profiles"), PeakProfileStore.cacheFolder(Map.of("XDG_CACHE_HOME", "/c", "HOME", "/h")));
        assertEquals(Path.of("/h/.cache/vmmkit/profiles"), PeakProfileStore.cacheFolder(Map.of("HOME", "/h")));
        assertEquals(Path.of("/h/.cache/vmmkit/profiles"), PeakProfileStore.cacheFolder(Map.of("XDG_CACHE_HOME", "rel", "HOME", "/h")));
    }

    @Test
    void theSettingChoosesOffAutoOrAFile() {
        Map<String, String> cache = Map.of("XDG_CACHE_HOME", dir.toString());
        assertNull(PeakProfileStore.fromEnvironment(Map.of("VMM_PROFILE", "off"), TRAIN));
        assertEquals(dir.resolve("vmmkit/profiles/" + TRAIN.key() + ".json"), PeakProfileStore.fromEnvironment(cache, TRAIN).file());
        assertEquals(dir.resolve("p.json"), PeakProfileStore.fromEnvironment(Map.of("VMM_PROFILE", dir.resolve("p.json").toString()), TRAIN).file());
        for (String good : List.of("off", "auto", " auto ", "", dir.resolve("p.json").toString())) {
            assertNull(PeakProfileStore.problem(Map.of("VMM_PROFILE", good)), good);
        }
        String folder = PeakProfileStore.problem(Map.of("VMM_PROFILE", dir.toString()));
        assertTrue(folder.startsWith("VMM_PROFILE=" + dir + ": must be off, auto") && folder.endsWith("this is a folder"), folder);
        String missing = PeakProfileStore.problem(Map.of("VMM_PROFILE", dir.resolve("no/p.json").toString()));
        assertTrue(missing.endsWith("the folder " + dir.resolve("no") + " does not exist"), missing);
        assertEquals(List.of(missing), InterposeSettings.problems(Map.of("VMM_PROFILE", dir.resolve("no/p.json").toString())));
    }

    @Test
    void aSaveReplacesTheDevicesItHasAndKeepsTheOthers() throws IOException {
        PeakProfileStore store = PeakProfileStore.fromEnvironment(Map.of("XDG_CACHE_HOME", dir.toString()), TRAIN);
        store.save(profile(TRAIN, device(0, 100), device(1, 200)));
        store.save(profile(TRAIN, device(1, 150)));
        PeakProfile read = store.load(TRAIN, (m, e) -> { throw new AssertionError(m); });
        assertEquals(List.of(device(0, 100), device(1, 150)), read.devices());
        try (var files = Files.list(store.file().getParent())) {
            assertEquals(List.of(store.file().getFileName().toString(), store.file().getFileName() + ".lock"),
                    files.map(f -> f.getFileName().toString()).sorted().toList(), "no temporary file is left");
        }
    }

    @Test
    void anotherProgramsFileIsIgnoredInAutoAndUsedWhenNamed() throws IOException {
        ProgramIdentity other = new ProgramIdentity("/bin/other", List.of(), "/");
        Path file = dir.resolve("vmmkit/profiles/" + TRAIN.key() + ".json");
        Files.createDirectories(file.getParent());
        Files.writeString(file, profile(other, device(0, 100)).toJson());
        List<String> warnings = new ArrayList<>();
        assertNull(PeakProfileStore.fromEnvironment(Map.of("XDG_CACHE_HOME", dir.toString()), TRAIN)
                .load(TRAIN, (m, e) -> warnings.add(m)));
        assertEquals(1, warnings.size());
        assertTrue(warnings.getFirst().contains("belongs to another program (/bin/other)"), warnings::toString);
        assertEquals(100, PeakProfileStore.fromEnvironment(Map.of("VMM_PROFILE", file.toString()), TRAIN)
                .load(TRAIN, (m, e) -> warnings.add(m)).device(0).peakLiveBytes());
        assertEquals(1, warnings.size());
    }

    @Test
    void aProfileThatCannotBeReadIsOneWarningAndASaveThatFailsThrows() throws IOException {
        PeakProfileStore store = PeakProfileStore.fromEnvironment(Map.of("XDG_CACHE_HOME", dir.toString()), TRAIN);
        Files.createDirectories(store.file()); // a folder where the file should be
        List<String> warnings = new ArrayList<>();
        assertNull(store.load(TRAIN, (m, e) -> warnings.add(m)));
        assertEquals(List.of("cannot read the peak profile " + store.file() + "; running without it"), warnings);
        assertThrows(IOException.class, () -> store.save(profile(TRAIN, device(0, 100))));
        assertTrue(Files.isDirectory(store.file()), "left as it was");
    }

    @Test
    void concurrentSavesOfOneProgramKeepEveryDevice() throws Exception {
        PeakProfileStore store = PeakProfileStore.fromEnvironment(Map.of("XDG_CACHE_HOME", dir.toString()), TRAIN);
        int devices = 16;
        ExecutorService pool = Executors.newFixedThreadPool(8);
        try {
            List<Future<?>> saves = new ArrayList<>();
            for (int round = 0; round < 4; round++) {
                for (int d = 0; d < devices; d++) {
                    int device = d;
                    saves.add(pool.submit(() -> {
                        store.save(profile(TRAIN, device(device, 1000 + device)));
                        return null;
                    }));
                }
            }
            for (Future<?> save : saves) save.get();
        } finally {
            pool.shutdownNow();
        }
        PeakProfile read = store.load(TRAIN, (m, e) -> { throw new AssertionError(m); });
        assertEquals(devices, read.devices().size());
        for (int d = 0; d < devices; d++) assertEquals(1000 + d, read.device(d).peakLiveBytes());
    }

    private static StatsWriter.DeviceFigures figures(int device, long peakLive) {
        return new StatsWriter.DeviceFigures(device,
                new AllocatorStats(3, 3, 0, peakLive, 0, peakLive, 0, 0, 0, 0, Map.of()), 0);
    }

    @Test
    void aRunUsesTheProfileUnlessAHintIsSetOrItExceedsTheDevice() throws IOException {
        PeakProfileStore store = PeakProfileStore.fromEnvironment(Map.of("VMM_PROFILE", dir.resolve("p.json").toString()), TRAIN);
        PeakProfile saved = profile(TRAIN, device(0, 100 << 20), device(1, 900L << 30));
        PeakProfileUse use = new PeakProfileUse(store, TRAIN, saved, false);
        assertEquals(100 << 20, use.hintFor(0, 0, () -> 80L << 30));
        assertEquals(0, use.hintFor(1, 0, () -> 80L << 30), "a peak above the device's memory is not used");
        assertEquals(0, use.hintFor(2, 0, () -> 80L << 30), "no entry, no hint");
        assertEquals(100 << 20, new PeakProfileUse(store, TRAIN, saved, false).hintFor(0, 0, () -> {
            throw new dev.vmmkit.driver.DriverException(dev.vmmkit.driver.CudaResult.UNKNOWN, "unknown", "cuMemGetInfo");
        }), "a device whose memory cannot be asked still gets its hint, and its allocator");
        assertTrue(use.used());
        assertEquals(100 << 20, use.hintOf(0));

        PeakProfileUse explicit = new PeakProfileUse(store, TRAIN, saved, true);
        assertEquals(64 << 20, explicit.hintFor(0, 64 << 20, () -> { throw new AssertionError("not asked"); }));
        assertEquals(0, explicit.hintFor(1, 0, () -> 80L << 30), "VMM_PEAK_HINT=0 is a choice too");
        assertFalse(explicit.used());
    }

    @Test
    void aPeakOfLiveBytesAbovePhysicalMemoryIsSavedAsThePhysicalPeak() throws IOException {
        Path file = dir.resolve("p.json");
        PeakProfileStore store = PeakProfileStore.fromEnvironment(Map.of("VMM_PROFILE", file.toString()), TRAIN);
        PeakProfileUse use = new PeakProfileUse(store, TRAIN, null, false);
        // A paused tag's 70 GiB stayed live while another phase held 124 GiB: 194 GiB live at the peak.
        StatsWriter.DeviceFigures paused = new StatsWriter.DeviceFigures(0,
                new AllocatorStats(3, 1, 0, 194L << 30, 0, 124L << 30, 0, 0, 0, 0, Map.of()), 0);
        StatsWriter.DeviceFigures plain = new StatsWriter.DeviceFigures(1,
                new AllocatorStats(3, 3, 0, 100L << 20, 0, 104L << 20, 0, 0, 0, 0, Map.of()), 0);
        assertTrue(use.save(List.of(paused, plain), 0));
        PeakProfile read = PeakProfile.parse(Files.readString(file));
        assertEquals(124L << 30, read.device(0).peakLiveBytes(), "at most the physical peak");
        assertEquals(100L << 20, read.device(1).peakLiveBytes(), "a run without pauses saves its peak of live bytes");
        assertTrue(use.statsJson().contains("\"saved_peaks\":[{\"device\":0,\"bytes\":" + (124L << 30) + "},"),
                "the stats file says what was saved: " + use.statsJson());
    }

    @Test
    void onlyARunThatEndedWithStatusZeroAndAllocatedSaves() throws IOException {
        Path file = dir.resolve("p.json");
        PeakProfileStore store = PeakProfileStore.fromEnvironment(Map.of("VMM_PROFILE", file.toString()), TRAIN);
        PeakProfileUse use = new PeakProfileUse(store, TRAIN, null, false);
        assertFalse(use.save(List.of(figures(0, 5000)), 1));
        assertFalse(use.save(List.of(figures(0, 0)), 0));
        assertFalse(Files.exists(file));
        assertTrue(use.statsJson().contains("\"saved\":false"));
        assertTrue(use.save(List.of(figures(0, 5000), figures(1, 0)), 0));
        assertEquals(List.of(0), PeakProfile.parse(Files.readString(file)).devices().stream().map(PeakProfile.DeviceFigures::device).toList());
        assertEquals("{\"file\":\"" + file + "\",\"read\":false,\"used\":false,\"saved\":true,"
                + "\"saved_peaks\":[{\"device\":0,\"bytes\":5000}]}", use.statsJson());
        assertEquals("null", PeakProfileUse.NONE.statsJson());
    }
}
