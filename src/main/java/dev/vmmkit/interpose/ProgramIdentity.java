package dev.vmmkit.interpose;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;

/**
 * What makes two runs "the same program" for a peak profile: the executable (links resolved), its
 * arguments, the working directory, and the few environment variables that change how much memory
 * a program asks for ({@link #MEMORY_VARIABLES}). {@code python3 train.py --batch 32} in one folder
 * is one program; another batch size, another folder or PyTorch's cache turned off is another. The
 * key is a hash of them all, a file name in the profile cache.
 *
 * @param executable  the resolved path of the running executable ({@code /proc/self/exe})
 * @param arguments   its arguments, without argv[0] (which is only how the executable was named)
 * @param directory   the working directory when vmmkit started in the program
 * @param environment {@code NAME=value} of each of {@link #MEMORY_VARIABLES} that is set, in that order
 */
record ProgramIdentity(String executable, List<String> arguments, String directory, List<String> environment) {
    /**
     * Variables that change what a program allocates: PyTorch's allocator settings (with the cache
     * off, every tensor is its own cudaMalloc; with it on, vmmkit sees PyTorch's segments) and the
     * devices it sees (ranks of one job on one machine differ only there).
     */
    static final List<String> MEMORY_VARIABLES = List.of("CUDA_VISIBLE_DEVICES", "PYTORCH_CUDA_ALLOC_CONF",
            "PYTORCH_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING");

    ProgramIdentity {
        arguments = List.copyOf(arguments);
        environment = List.copyOf(environment);
    }

    /** A program identified without environment variables. */
    ProgramIdentity(String executable, List<String> arguments, String directory) {
        this(executable, arguments, directory, List.of());
    }

    /** This process, as Linux describes it in {@code /proc/self}, with the variables of {@code env}. */
    static ProgramIdentity current(Map<String, String> env) throws IOException {
        String executable = Path.of("/proc/self/exe").toRealPath().toString();
        byte[] raw = Files.readAllBytes(Path.of("/proc/self/cmdline"));
        List<String> argv = new ArrayList<>();
        int start = 0;
        for (int i = 0; i < raw.length; i++) {
            if (raw[i] != 0) continue;
            argv.add(new String(raw, start, i - start, StandardCharsets.UTF_8));
            start = i + 1;
        }
        List<String> arguments = argv.isEmpty() ? List.of() : argv.subList(1, argv.size());
        String directory = Path.of("/proc/self/cwd").toRealPath().toString();
        List<String> environment = new ArrayList<>();
        for (String name : MEMORY_VARIABLES) {
            String value = env.get(name);
            if (value != null) environment.add(name + "=" + value);
        }
        return new ProgramIdentity(executable, arguments, directory, environment);
    }

    /**
     * 16 hex digits of a 64-bit FNV-1a hash over the parts, each ended by a NUL (no part holds
     * one). Not a cryptographic hash: the file holds the identity, which a reader compares, so a
     * collision only makes two programs share a file; and this runs on the program's first CUDA call,
     * where a message digest's set-up would cost tens of milliseconds.
     */
    String key() {
        long hash = 0xcbf29ce484222325L;
        hash = update(hash, executable);
        hash = update(hash, directory);
        for (String argument : arguments) hash = update(hash, argument);
        hash = update(hash, "");  // arguments end: a variable never passes for an argument
        for (String variable : environment) hash = update(hash, variable);
        return HexFormat.of().toHexDigits(hash);
    }

    private static long update(long hash, String part) {
        for (byte b : part.getBytes(StandardCharsets.UTF_8)) hash = (hash ^ (b & 0xff)) * 0x100000001b3L;
        return hash * 0x100000001b3L; // the NUL that ends the part
    }
}
