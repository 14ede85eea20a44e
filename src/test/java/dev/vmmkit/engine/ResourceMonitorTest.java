package dev.vmmkit.engine;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** The monitor's thresholds with injected readers: a fake device whose usage is the models' sizes. */
class ResourceMonitorTest {
    private static final System.Logger LOGGER = System.getLogger(ResourceMonitorTest.class.getName());

    /** Models by name in LRU order (oldest first) with their bytes, plus cached bytes and busy names. */
    private static final class FakeDevice implements MemoryRelief {
        final Map<String, Long> models = new LinkedHashMap<>();
        final List<String> actions = new ArrayList<>();
        Set<String> busy = Set.of();
        long cached;
        long ram;

        MemoryFigures device() {
            return new MemoryFigures(cached + models.values().stream().mapToLong(Long::longValue).sum(), 100);
        }

        @Override
        public long clearCaches() {
            long released = cached;
            cached = 0;
            actions.add("clear " + released);
            return released;
        }

        @Override
        public Optional<String> relieveLeastRecentlyUsedIdle(String reason) {
            for (String name : models.keySet()) {
                if (busy.contains(name)) continue;
                long bytes = models.remove(name);
                ram -= bytes / 2;
                actions.add(reason + " " + name);
                return Optional.of("evicted " + name);
            }
            return Optional.empty();
        }
    }

    private static ResourceMonitor monitor(FakeDevice fake, double vram, double ram) {
        return new ResourceMonitor(fake::device, () -> new MemoryFigures(fake.ram, 100), fake, vram, ram, LOGGER);
    }

    @Test
    void underTheThresholdNothingHappens() {
        FakeDevice fake = new FakeDevice();
        fake.models.put("a", 40L);
        fake.models.put("b", 50L);
        monitor(fake, 0.9, 0.9).pollOnce();
        assertEquals(List.of(), fake.actions);
    }

    @Test
    void pastTheThresholdCachesGoFirstThenIdleModelsInLruOrderUntilUnder() {
        FakeDevice fake = new FakeDevice();
        fake.models.put("a", 30L);
        fake.models.put("b", 30L);
        fake.models.put("c", 30L);
        fake.cached = 5;
        monitor(fake, 0.5, 0.9).pollOnce();
        assertEquals(List.of("clear 5", "vram a", "vram b"), fake.actions);
        assertEquals(Set.of("c"), fake.models.keySet());
    }

    @Test
    void clearingCachesAloneCanBeEnough() {
        FakeDevice fake = new FakeDevice();
        fake.models.put("a", 85L);
        fake.cached = 10;
        monitor(fake, 0.9, 0.9).pollOnce();
        assertEquals(List.of("clear 10"), fake.actions);
    }

    @Test
    void busyModelsAreSkippedAndTheMonitorStopsWhenNothingIdleIsLeft() {
        FakeDevice fake = new FakeDevice();
        fake.models.put("a", 40L);
        fake.models.put("b", 40L);
        fake.models.put("c", 15L);
        fake.busy = Set.of("a", "b");
        ResourceMonitor monitor = monitor(fake, 0.5, 0.9);
        monitor.pollOnce();
        assertEquals(List.of("clear 0", "vram c"), fake.actions);
        monitor.pollOnce(); // still past, still nothing idle: no eviction, no error
        assertEquals(List.of("clear 0", "vram c", "clear 0"), fake.actions);
        fake.busy = Set.of("b");
        monitor.pollOnce();
        assertEquals(Set.of("b"), fake.models.keySet());
    }

    @Test
    void hostRamPastItsThresholdEvictsForRam() {
        FakeDevice fake = new FakeDevice();
        fake.models.put("a", 10L);
        fake.models.put("b", 10L);
        fake.ram = 95;
        monitor(fake, 0.9, 0.9).pollOnce();
        assertEquals(List.of("clear 0", "ram a"), fake.actions);
    }

    @Test
    void hostRamReaderUsesTheCgroupLimitWhenLower(@TempDir Path dir) throws Exception {
        Path meminfo = Files.writeString(dir.resolve("meminfo"),
                "MemTotal:       16000000 kB\nMemFree:         1000000 kB\nMemAvailable:    4000000 kB\n");
        Path cgroup = Files.createDirectories(dir.resolve("cgroup"));
        assertEquals(new MemoryFigures(12_000_000L * 1024, 16_000_000L * 1024), new HostRamReader(meminfo, cgroup).read());
        Files.writeString(cgroup.resolve("memory.max"), "max\n");
        Files.writeString(cgroup.resolve("memory.current"), "1000\n");
        assertEquals(new MemoryFigures(12_000_000L * 1024, 16_000_000L * 1024), new HostRamReader(meminfo, cgroup).read());
        Files.writeString(cgroup.resolve("memory.max"), "2000000000\n");
        assertEquals(new MemoryFigures(1000, 2_000_000_000L), new HostRamReader(meminfo, cgroup).read());
    }
}
