package dev.vmmkit.interpose;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.vmmkit.driver.OtherProcesses;
import dev.vmmkit.driver.VmmDriver;
import dev.vmmkit.trace.AllocationRecorder;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The line at exit about device memory vmmkit did not serve: said when the program routes all its
 * memory to vmmkit, not when it routes only its memory tags (VMM_SERVES=tags, the Python module's
 * tag pools), where the rest is the program's own by design; the stats file keeps the figure in both.
 */
class NotServedAtExitTest {
    private static final long GIB = 1L << 30;

    @TempDir
    Path dir;

    @AfterEach
    void uninstall() {
        InterposedCalls.install(null);
    }

    /** Exits a session whose device 0 has 20 GiB in use, none of it vmmkit's; returns what it printed. */
    private String exitWithMemoryFromElsewhere(boolean servesAll, Path stats) {
        NotServedWatch watch = new NotServedWatch(0);
        InterposeSession session = new InterposeSession(false, new BumpResourceFactory(Map.of("VMM_DEVICE_MEMORY", "8M")),
                AllocationRecorder.NONE, stats, PeakProfileUse.NONE, watch, null, servesAll);
        InterposedCalls.install(session);
        watch.watch(0, device -> new VmmDriver.MemoryInfo(10 * GIB, 30 * GIB), device -> OtherProcesses.NONE,
                session.managers.forDevice(0));
        PrintStream err = System.err;
        ByteArrayOutputStream printed = new ByteArrayOutputStream();
        System.setErr(new PrintStream(printed, true, StandardCharsets.UTF_8));
        try {
            session.finish(0, 0);
        } finally {
            System.setErr(err);
        }
        return printed.toString(StandardCharsets.UTF_8);
    }

    @Test
    void aProgramThatRoutesAllItsMemoryHearsOfMemoryFromElsewhere() throws Exception {
        Path stats = dir.resolve("all.json");
        String printed = exitWithMemoryFromElsewhere(true, stats);
        assertTrue(printed.contains("device 0: 20.0 GiB of the 20.0 GiB"), printed);
        assertEquals(20 * GIB, notServedBytes(stats));
    }

    @Test
    void aProgramThatRoutesOnlyItsTagsDoesNot() throws Exception {
        Path stats = dir.resolve("tags.json");
        String printed = exitWithMemoryFromElsewhere(!InterposeSettings.servesTagsOnly(Map.of("VMM_SERVES", "tags")), stats);
        assertEquals("", printed);
        assertEquals(20 * GIB, notServedBytes(stats));
    }

    @Test
    void servingTheTagsOnlyTheWatchSamplesAtExitOnly() throws Exception {
        Map<String, String> env = Map.of("VMM_DRIVER", "host", "VMM_PROFILE", "off");
        InterposeSession all = InterposeSession.fromEnvironment(false, env);
        InterposeSession tags = InterposeSession.fromEnvironment(false,
                Map.of("VMM_DRIVER", "host", "VMM_PROFILE", "off", "VMM_SERVES", "tags"));
        try {
            assertTrue(all.notServed.samplesWhileRunning());
            assertTrue(!tags.notServed.samplesWhileRunning());
        } finally {
            all.finish(0, 0);
            tags.finish(0, 0);
        }
    }

    @Test
    void theSettingIsChecked() {
        assertEquals(java.util.List.of("VMM_SERVES=some: must be all or tags"),
                InterposeSettings.problems(Map.of("VMM_SERVES", "some")));
        assertEquals(java.util.List.of(), InterposeSettings.problems(Map.of("VMM_SERVES", "tags")));
        assertTrue(!InterposeSettings.servesTagsOnly(Map.of()) && !InterposeSettings.servesTagsOnly(Map.of("VMM_SERVES", "all")));
    }

    private static long notServedBytes(Path stats) throws Exception {
        JsonNode s = new ObjectMapper().readTree(stats.toFile());
        return s.get("devices").get(0).get("not_served_bytes").asLong();
    }
}
