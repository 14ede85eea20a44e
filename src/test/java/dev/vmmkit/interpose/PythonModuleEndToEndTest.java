package dev.vmmkit.interpose;

import dev.vmmkit.ProcessResult;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
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
    private static final Path PROGRAMS = Path.of("src", "test", "python").toAbsolutePath();
    private static final Path MODULE = Path.of("python").toAbsolutePath();
    private static final Path TMS_COMPAT = MODULE.resolve("compat");

    @TempDir
    Path dir;

    private static Path python() {
        Path python = Stream.of("/usr/bin/python3", "/usr/local/bin/python3").map(Path::of).filter(Files::isExecutable)
                .findFirst().orElse(null);
        assumeTrue(python != null, "no python3 in /usr/bin or /usr/local/bin: the Python module is not checked");
        return python;
    }

    private ProcessResult run(List<String> command, Map<String, String> extraEnv) throws IOException, InterruptedException {
        Map<String, String> env = new HashMap<>(extraEnv);
        env.put("PYTHONPATH", MODULE.toString());
        return VmmkitRunCommand.run(command, env, dir);
    }

    /**
     * Runs src/test/python's {@code program} with the shim opened by the program (no preload) and
     * {@code args} after it, and checks that it exited 0 after printing {@code okLine}.
     */
    private ProcessResult runDlopened(String program, Map<String, String> extraEnv, String okLine, String... args)
            throws IOException, InterruptedException {
        Map<String, String> env = new HashMap<>(VmmkitRunCommand.dlopened());
        env.putAll(extraEnv);
        List<String> command = new ArrayList<>(List.of(python().toString(), PROGRAMS.resolve(program).toString(),
                NATIVE.resolve("libcudart.so").toString()));
        command.addAll(List.of(args));
        ProcessResult result = run(command, env);
        assertEquals(0, result.exitCode(), result.toString());
        assertTrue(result.stdout().contains(okLine), result.toString());
        return result;
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
     * Under vmmkit run, torch_memory_saver's API (python/compat, alone on the path) with its
     * TMS_INIT_ENABLE: every allocation outside regions, another thread's too, is the default tag's
     * and kept, disable() leaves a block's out, and a region's backup setting is the allocation's.
     */
    @Test
    void torchMemorySaversApiPausesThroughVmmkit() throws Exception {
        Map<String, String> env = new HashMap<>(Map.of("TMS_INIT_ENABLE", "1", "TMS_INIT_ENABLE_CPU_BACKUP", "1"));
        env.put("PYTHONPATH", TMS_COMPAT + ":" + PROGRAMS);
        ProcessResult result = VmmkitRunCommand.run(VmmkitRunCommand.of("--driver", "host", "--", python().toString(),
                PROGRAMS.resolve("tms_compat_test.py").toString(), NATIVE.resolve("libcudart.so").toString()), env, dir);
        assertEquals(0, result.exitCode(), result.toString());
        assertTrue(result.stdout().contains("ok python-tms-compat"), result.toString());
    }

    /**
     * As PyTorch's pluggable allocator (the shim sees no capture call there): CUDAGraph's captures
     * tell vmmkit, so what they allocate and free on the capturing stream is the graph's own
     * (the runtime's), and a block vmmkit freed there waits for the capture's end; a capture the
     * program tells vmmkit of itself, made on another thread, refuses a pause or resume beside
     * it: without being told, the pause would synchronise the device under the capture.
     */
    @Test
    void asThePluggableAllocatorCapturesAllocateTheGraphsOwnAndHoldPausesBack() throws Exception {
        ProcessResult result = runDlopened("pluggable_captures_test.py", Map.of(), "ok python-pluggable-captures",
                VmmkitRunCommand.SHIM.toString());
        assertTrue(result.stderr().contains("refused: a CUDA stream capture is under way"), result.toString());
    }

    /**
     * In a PyTorch program with no vmmkit in it, the first region makes vmmkit serve the tagged
     * tensors only, through PyTorch's memory pools; the rest stays PyTorch's, CUDA graphs are not
     * refused, and a paused tag's region is refused while its pool may hold blocks given back.
     */
    @Test
    void withoutVmmkitRunTheTagsPoolsAreVmmkitsAndTheRestIsPyTorchs() throws Exception {
        ProcessResult result = runDlopened("tag_pools_test.py",
                Map.of("VMM_STATS_FILE", dir.resolve("stats.json").toString()), "ok python-tag-pools");
        assertTrue(!result.stderr().contains("did not come from vmmkit"), result.toString());
    }

    /**
     * Serving the tags only, with threads: four allocate into tags of their own while a fifth
     * pauses and resumes them; refusals are the only failures, and every tensor's bytes come through.
     */
    @Test
    void tagPoolsUnderThreadsKeepEveryTensor() throws Exception {
        runDlopened("tag_pools_threads_test.py", Map.of(), "ok python-tag-pools-threads");
    }

    /**
     * Serving the tags only, a CUDA graph captured with vmmkit.cuda_graph takes its memory from a
     * pool of its own whose segments are vmmkit's, under the tag: a pause gives them back (kept
     * bytes return, discarded ones do not) and leaves a plain graph's memory alone; a capture of
     * a paused tag, inside a region, or into a pool that is not the tag's graphs' is refused.
     */
    @Test
    void taggedGraphsMemoryIsPausedWithTheTag() throws Exception {
        runDlopened("tag_graphs_test.py", Map.of(), "ok python-tag-graphs");
    }
}
