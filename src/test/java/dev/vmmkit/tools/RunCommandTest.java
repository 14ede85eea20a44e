package dev.vmmkit.tools;

import org.junit.jupiter.api.Test;
import picocli.CommandLine;

import java.nio.file.Path;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class RunCommandTest {

    private static RunCommand parse(String... args) {
        RunCommand run = new RunCommand();
        new CommandLine(run).parseArgs(args);
        return run;
    }

    @Test
    void optionsBecomeTheShimsEnvironment() throws Exception {
        RunCommand run = parse("--mode", "monitor", "--driver", "host", "--device-memory", "64M", "--stats", "s.json",
                "--trace", "t.csv", "--", "prog", "--flag");
        assertEquals(java.util.List.of("prog", "--flag"), run.command);
        Map<String, String> env = run.environment(Map.of("LD_PRELOAD", "/lib/other.so"), Path.of("/x/libvmmkit_preload.so"));
        assertEquals("/x/libvmmkit_preload.so:/lib/other.so", env.get("LD_PRELOAD"));
        assertEquals("monitor", env.get("VMM_MODE"));
        assertEquals("host", env.get("VMM_DRIVER"));
        assertEquals(Long.toString(64L << 20), env.get("VMM_DEVICE_MEMORY"));
        assertEquals(Path.of("s.json").toAbsolutePath().toString(), env.get("VMM_STATS_FILE"));
        assertEquals(Path.of("t.csv").toAbsolutePath().toString(), env.get("VMM_TRACE_FILE"));
        assertEquals(System.getProperty("java.home"), env.get("VMMKIT_JAVA_HOME"));
        assertFalse(env.get("VMMKIT_JAR").isBlank());
    }

    @Test
    void settingsNotGivenAreLeftToTheEnvironment() throws Exception {
        Map<String, String> env = parse("--", "prog").environment(Map.of("VMMKIT_JAR", "/my.jar"), Path.of("/s.so"));
        assertEquals("/s.so", env.get("LD_PRELOAD"));
        assertEquals("/my.jar", env.get("VMMKIT_JAR"));
        assertTrue(!env.containsKey("VMM_MODE") && !env.containsKey("VMM_DRIVER") && !env.containsKey("VMM_STATS_FILE")
                && !env.containsKey("VMM_DEVICE_MEMORY"));
    }

    @Test
    void theProgramIsServedWholeWhateverAParentProcessSet() throws Exception {
        // A Python program serving its tags only (VMM_SERVES=tags) that starts a child under vmmkit run.
        Map<String, String> env = parse("--", "prog").environment(Map.of("VMM_SERVES", "tags"), Path.of("/s.so"));
        assertEquals("all", env.get("VMM_SERVES"));
    }

    @Test
    void theProfileOptionIsOffAutoOrAnAbsolutePath() throws Exception {
        assertEquals("off", parse("--profile", "off", "--", "prog").environment(Map.of(), Path.of("/s.so")).get("VMM_PROFILE"));
        assertEquals("auto", parse("--profile", "auto", "--", "prog").environment(Map.of(), Path.of("/s.so")).get("VMM_PROFILE"));
        assertEquals(Path.of("p.json").toAbsolutePath().toString(),
                parse("--profile", "p.json", "--", "prog").environment(Map.of(), Path.of("/s.so")).get("VMM_PROFILE"));
        assertFalse(parse("--", "prog").environment(Map.of(), Path.of("/s.so")).containsKey("VMM_PROFILE"));
    }

    @Test
    void vmmModeSendsJaxsBuffersToVmmkitUnlessTheProgramChoseItsAllocator() throws Exception {
        Map<String, String> env = parse("--", "prog").environment(Map.of(), Path.of("/s.so"));
        assertEquals("cuda_async", env.get("XLA_PYTHON_CLIENT_ALLOCATOR"));
        assertEquals("false", env.get("XLA_PYTHON_CLIENT_PREALLOCATE"));
        // The program's own choice stays: nothing of either is added over it.
        Map<String, String> chosen = parse("--", "prog").environment(
                Map.of("XLA_PYTHON_CLIENT_ALLOCATOR", "bfc", "XLA_PYTHON_CLIENT_PREALLOCATE", "true"), Path.of("/s.so"));
        assertFalse(chosen.containsKey("XLA_PYTHON_CLIENT_ALLOCATOR") || chosen.containsKey("XLA_PYTHON_CLIENT_PREALLOCATE"));
        // Monitor mode, by option or by VMM_MODE, leaves the program as it would run natively.
        assertFalse(parse("--mode", "monitor", "--", "prog").environment(Map.of(), Path.of("/s.so"))
                .containsKey("XLA_PYTHON_CLIENT_ALLOCATOR"));
        assertFalse(parse("--", "prog").environment(Map.of("VMM_MODE", "monitor"), Path.of("/s.so"))
                .containsKey("XLA_PYTHON_CLIENT_ALLOCATOR"));
    }

    @Test
    void aBadModeIsRefused() {
        assertEquals(2, VmmkitCli.run("run", "--mode", "fast", "--", "true"));
    }

    @Test
    void aDeviceMemoryThatIsNoSizeAboveZeroIsRefused() {
        assertEquals(2, VmmkitCli.run("run", "--device-memory", "lots", "--", "true"));
        assertEquals(2, VmmkitCli.run("run", "--device-memory", "0", "--", "true"));
    }
}
