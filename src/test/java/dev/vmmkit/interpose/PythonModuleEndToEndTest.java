package dev.vmmkit.interpose;

import dev.vmmkit.ProcessResult;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The Python module (python/vmmkit) in a real Python process over the host driver, in both ways a
 * program meets vmmkit: under {@code vmmkit run} (the shim preloaded) and as PyTorch's pluggable
 * allocator (the shim opened with dlopen; a stand-in {@code torch} module plays PyTorch). The
 * programs are src/test/python's; each prints its "ok" line.
 */
class PythonModuleEndToEndTest {
    private static final Path NATIVE = Path.of("target", "test-native").toAbsolutePath();
    private static final Path SHIM = Path.of("target", "native", "libvmmkit_preload.so").toAbsolutePath();
    private static final Path PROGRAMS = Path.of("src", "test", "python").toAbsolutePath();
    private static final Path MODULE = Path.of("python").toAbsolutePath();

    @TempDir
    Path dir;

    private static Path python() {
        Path python = Stream.of("/usr/bin/python3", "/usr/local/bin/python3").map(Path::of).filter(Files::isExecutable)
                .findFirst().orElse(null);
        assumeTrue(python != null, "no python3 in /usr/bin or /usr/local/bin: the Python module is not checked");
        return python;
    }

    private ProcessResult run(List<String> command, Map<String, String> extraEnv) throws IOException, InterruptedException {
        ProcessBuilder builder = new ProcessBuilder(command)
                .redirectOutput(dir.resolve("stdout.txt").toFile())
                .redirectError(dir.resolve("stderr.txt").toFile());
        Map<String, String> env = builder.environment();
        VmmkitRunCommand.isolate(env, dir);
        env.put("PYTHONPATH", MODULE.toString());
        env.putAll(extraEnv);
        Process process = builder.start();
        if (!process.waitFor(120, TimeUnit.SECONDS)) {
            process.destroyForcibly();
            throw new AssertionError("the Python program timed out; stderr:\n" + Files.readString(dir.resolve("stderr.txt")));
        }
        return new ProcessResult(process.exitValue(), Files.readString(dir.resolve("stdout.txt")),
                Files.readString(dir.resolve("stderr.txt")));
    }

    /** Under vmmkit run: regions, pause, resume, their errors, a capture seen by the shim. */
    @Test
    void thePythonModulePausesAndResumesTags() throws Exception {
        ProcessResult result = run(VmmkitRunCommand.of("--driver", "host", "--", python().toString(),
                PROGRAMS.resolve("tags_test.py").toString(), NATIVE.resolve("libcudart.so").toString()), Map.of());
        assertEquals(0, result.exitCode(), result.toString());
        assertTrue(result.stdout().contains("ok python-tags"), result.toString());
    }

    /**
     * As PyTorch's pluggable allocator: CUDAGraph's captures are refused before anything is
     * captured, and a capture the program tells vmmkit of (the shim sees no capture call there),
     * made on another thread, refuses a pause or resume beside it: without being told, the pause
     * would synchronise the device under the capture.
     */
    @Test
    void asThePluggableAllocatorCudaGraphIsRefusedAndToldCapturesHoldPausesBack() throws Exception {
        ProcessResult result = run(List.of(python().toString(), PROGRAMS.resolve("pluggable_captures_test.py").toString(),
                NATIVE.resolve("libcudart.so").toString(), SHIM.toString()), Map.of(
                "VMMKIT_JAVA_HOME", System.getProperty("java.home"),
                "VMM_DRIVER", "host",
                "LD_PRELOAD", ""));
        assertEquals(0, result.exitCode(), result.toString());
        assertTrue(result.stdout().contains("ok python-pluggable-captures"), result.toString());
        assertTrue(result.stderr().contains("refused: a CUDA stream capture is under way"), result.toString());
    }
}
