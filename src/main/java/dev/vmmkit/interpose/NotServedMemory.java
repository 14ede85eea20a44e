package dev.vmmkit.interpose;

import dev.vmmkit.core.ByteSize;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * Says when a program used device memory that vmmkit did not serve, and what it knows of why, so
 * that vmmkit never fails to serve silently. The figure is the device memory in use beyond what
 * vmmkit holds (its mapped and pooled handles), at its highest over the run: memory from an
 * allocator vmmkit does not see (a framework's own pool reserved before vmmkit's calls were in
 * place, cuMemCreate, managed memory) and CUDA's own (contexts, libraries' workspaces). Below
 * {@link #SIGNIFICANT_BYTES}, or below {@link #SIGNIFICANT_SHARE} of what the program used, it is
 * CUDA's own and nothing is said.
 */
final class NotServedMemory {
    /** A CUDA context with cuBLAS/cuDNN workspaces and loaded modules stays under this. */
    static final long SIGNIFICANT_BYTES = 1L << 30;
    /** Share of the device memory used that must be outside vmmkit before it is worth a line. */
    static final double SIGNIFICANT_SHARE = 0.10;

    private NotServedMemory() {
    }

    /** What the process has loaded and set that explains memory vmmkit does not manage. */
    record Clues(boolean jax, String jaxAllocator, String jaxPreallocate, boolean torchExpandableSegments,
                 boolean ncclOwnHandles) {
        static final Clues NONE = new Clues(false, null, null, false, false);
        private static final Pattern EXPANDABLE = Pattern.compile("(?i)(^|,)\\s*expandable_segments\\s*:\\s*true");

        /** From the environment and the libraries mapped into this process ({@code /proc/self/maps}), one device used. */
        static Clues of(Map<String, String> env, String loadedLibraries) {
            return of(env, loadedLibraries, 1);
        }

        /** That, for a process that used {@code devicesUsed} devices through vmmkit. */
        static Clues of(Map<String, String> env, String loadedLibraries, int devicesUsed) {
            boolean jax = loadedLibraries.contains("jaxlib") || loadedLibraries.contains("xla_extension");
            boolean torch = loadedLibraries.contains("libc10_cuda");
            boolean expandable = torch && Stream.of("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
                    .map(env::get).anyMatch(conf -> conf != null && EXPANDABLE.matcher(conf).find());
            return new Clues(jax, env.get(FrameworkSettings.JAX_ALLOCATOR), env.get(FrameworkSettings.JAX_PREALLOCATE),
                    expandable, ncclOwnHandles(env, loadedLibraries, devicesUsed));
        }

        /**
         * NCCL loaded where it has GPUs to join: one rank of several (a launcher's WORLD_SIZE, or
         * NCCL's shared-memory segments mapped) or a process on several devices (JAX's pmap), and
         * left to make its buffers with cuMemCreate (its default, unless NCCL_CUMEM_ENABLE=0).
         * PyTorch loads NCCL in every CUDA process, so the library alone says nothing.
         */
        private static boolean ncclOwnHandles(Map<String, String> env, String loadedLibraries, int devicesUsed) {
            if (!loadedLibraries.contains("libnccl") || "0".equals(env.get(NCCL_CUMEM))) return false;
            String worldSize = env.get("WORLD_SIZE");
            boolean severalRanks = worldSize != null && worldSize.strip().matches("\\d{1,9}") && Integer.parseInt(worldSize.strip()) > 1;
            return severalRanks || devicesUsed > 1 || loadedLibraries.contains("/dev/shm/nccl-");
        }

        /** Of this process, which used {@code devicesUsed} devices through vmmkit. */
        static Clues ofThisProcess(int devicesUsed) {
            String maps;
            try {
                maps = Files.readString(Path.of("/proc/self/maps"));
            } catch (IOException | RuntimeException e) {
                maps = "";
            }
            return of(System.getenv(), maps, devicesUsed);
        }

        /** JAX loaded without the settings that let vmmkit serve each buffer ({@link FrameworkSettings}). */
        boolean jaxKeptFromVmmkit() {
            return jax && !(FrameworkSettings.JAX_ALLOCATOR_SERVED.equals(jaxAllocator)
                    && FrameworkSettings.JAX_PREALLOCATE_SERVED.equals(jaxPreallocate));
        }

        /** What JAX's allocator does instead, as the start of a sentence. */
        String jaxAllocatorDoes() {
            if (FrameworkSettings.JAX_ALLOCATOR_SERVED.equals(jaxAllocator)) {
                return "JAX's cuda_async allocator preallocates most of the device";
            }
            if ("platform".equals(jaxAllocator)) return "JAX's platform allocator makes each buffer itself with cuMemCreate";
            return "JAX's BFC allocator " + ("false".equals(jaxPreallocate) ? "pools device memory"
                    : "preallocates most of the device and pools it");
        }
    }

    /** PyTorch's expandable segments map their own handles (cuMemCreate), which vmmkit does not serve. */
    static final String TORCH_EXPANDABLE = "PyTorch's expandable segments make their memory with cuMemCreate: leave "
            + "expandable_segments out of PYTORCH_CUDA_ALLOC_CONF for vmmkit to serve the caching allocator's segments, "
            + "or set PYTORCH_NO_CUDA_MEMORY_CACHING=1 for it to manage every tensor";

    /** NCCL's switch between buffers of its own handles (cuMemCreate) and cudaMalloc. */
    static final String NCCL_CUMEM = "NCCL_CUMEM_ENABLE";

    /** NCCL's communication buffers, made with cuMemCreate by default. */
    static final String NCCL_BUFFERS = "most likely NCCL's communication buffers (NCCL is loaded and this program spans "
            + "GPUs; it makes them with cuMemCreate): " + NCCL_CUMEM + "=0 makes them with cudaMalloc, which vmmkit serves";

    /** The settings that let vmmkit serve every buffer of a JAX program. */
    static final String JAX_SETTINGS = FrameworkSettings.jaxAdvice();

    /**
     * The lines to print at exit for one device, from the watch's {@code peak} (the highest device
     * memory in use beyond vmmkit's, other processes' memory left out where it could be told);
     * empty when vmmkit served what there was to serve.
     */
    static List<String> lines(int device, NotServedWatch.Peak peak, Clues clues) {
        List<String> lines = new ArrayList<>();
        long outsideBytes = peak.outsideBytes();
        if (significant(outsideBytes, peak.usedBytes())) {
            lines.add("vmmkit: device " + device + ": " + ByteSize.formatOneDecimal(outsideBytes) + " of the "
                    + ByteSize.formatOneDecimal(peak.usedBytes()) + " of device memory in use did not come from vmmkit; "
                    + knownCause(clues).orElse(peak.unattributedProcesses() > 0 ? sharedDevice(peak.unattributedProcesses())
                    : "it came from calls vmmkit does not serve (cuMemCreate, managed memory, a memory pool of the "
                    + "program's own, or an allocator that reserved it before vmmkit started)"));
        } else if (clues.jaxKeptFromVmmkit()) {
            lines.add("vmmkit: " + clues.jaxAllocatorDoes() + ": " + JAX_SETTINGS + " to let vmmkit manage every buffer");
        }
        return lines;
    }

    /**
     * The line to print at exit when no device was opened: the program allocated nothing through
     * vmmkit. Said only where a clue explains it (an allocator that makes its own handles), so that
     * a program that never used the device hears nothing.
     */
    static List<String> linesWithoutDevices(Clues clues) {
        return allocatorOfItsOwn(clues).map(why -> List.of("vmmkit: no device memory came from vmmkit; " + why)).orElse(List.of());
    }

    /**
     * Why the figure may be other processes' memory, where NVML listed them under PIDs this process
     * cannot match, or gave no figure of their own (as under MIG).
     */
    private static String sharedDevice(int others) {
        return others + (others == 1 ? " other process" : " other processes") + " used the device then, and their memory "
                + "could not be told from this program's (NVML lists them under process ids of another PID namespace, or "
                + "without a figure of their own, as under MIG), so part or all of it may be theirs";
    }

    /** What the clues say kept memory from vmmkit, with the settings that would give it to vmmkit. */
    private static Optional<String> knownCause(Clues clues) {
        return allocatorOfItsOwn(clues).or(() -> clues.ncclOwnHandles() ? Optional.of(NCCL_BUFFERS) : Optional.empty());
    }

    /** A framework's allocator that makes its own handles: it can keep all of a program's memory from vmmkit. */
    private static Optional<String> allocatorOfItsOwn(Clues clues) {
        if (clues.jaxKeptFromVmmkit()) return Optional.of(clues.jaxAllocatorDoes() + ": " + JAX_SETTINGS);
        return clues.torchExpandableSegments() ? Optional.of(TORCH_EXPANDABLE) : Optional.empty();
    }

    static boolean significant(long outsideBytes, long usedBytes) {
        return outsideBytes >= SIGNIFICANT_BYTES && outsideBytes >= SIGNIFICANT_SHARE * usedBytes;
    }
}
