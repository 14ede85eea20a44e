package dev.vmmkit.interpose;

import java.nio.file.Path;
import java.util.Map;
import java.util.OptionalLong;

/**
 * Where each process of a program writes its stats file and its trace. A program may start
 * several CUDA processes (torchrun's ranks, torch.multiprocessing's children), each with vmmkit
 * inside; written to one path, the last to exit replaced the others' figures. Under
 * {@code vmmkit run} ({@link #ENVIRONMENT} set to a folder it made, and the path it collects in
 * each {@link Output#collectedVariable}) each process writes its own part there instead, named by its pid and the file it stands for, and {@code vmmkit run} puts the
 * parts together when the program has ended. Without it ({@code LD_PRELOAD} set by hand) each
 * process writes the path itself, as one process would.
 */
public final class RunParts {
    /** The folder of the run's parts, set by {@code vmmkit run} (not a setting of its own). */
    public static final String ENVIRONMENT = "VMMKIT_RUN_PARTS";

    /**
     * The files a process writes, by the variable that names each, and the variable in which
     * {@code vmmkit run} says that it collects that file from parts: a program that sets the file's
     * variable to another path itself gets that path, as without {@code vmmkit run}.
     */
    public enum Output {
        STATS("VMM_STATS_FILE", "VMMKIT_RUN_STATS_FILE", "stats"),
        TRACE("VMM_TRACE_FILE", "VMMKIT_RUN_TRACE_FILE", "trace");

        private final String variable;
        private final String collectedVariable;
        private final String partPrefix;

        Output(String variable, String collectedVariable, String partPrefix) {
            this.variable = variable;
            this.collectedVariable = collectedVariable;
            this.partPrefix = partPrefix;
        }

        /** The variable that names the file ({@code VMM_STATS_FILE}, {@code VMM_TRACE_FILE}). */
        public String variable() {
            return variable;
        }

        /** The variable holding the path whose parts {@code vmmkit run} collects. */
        public String collectedVariable() {
            return collectedVariable;
        }
    }

    private RunParts() {
    }

    /**
     * The file this process writes for {@code output}: null when its variable is not set, this
     * process's part when the run collects that path from parts, else the variable's path.
     */
    static Path pathFor(Output output, Map<String, String> env, long pid) {
        String target = env.get(output.variable);
        if (target == null || target.isBlank()) return null;
        String folder = env.get(ENVIRONMENT);
        boolean collected = folder != null && !folder.isBlank() && target.equals(env.get(output.collectedVariable));
        return collected ? partOf(Path.of(folder), output, pid, Path.of(target)) : Path.of(target);
    }

    /**
     * The part of process {@code pid} for {@code target} in {@code folder}: the target's file name
     * is kept at the end, so a trace part is gzipped exactly when its target is.
     */
    public static Path partOf(Path folder, Output output, long pid, Path target) {
        return folder.resolve(pid + "." + output.partPrefix + "." + target.getFileName());
    }

    /** The pid of {@code part} when it is a part of {@code output} for {@code target}; else empty. */
    public static OptionalLong pidOf(Path part, Output output, Path target) {
        String name = String.valueOf(part.getFileName());
        String suffix = "." + output.partPrefix + "." + target.getFileName();
        if (!name.endsWith(suffix)) return OptionalLong.empty();
        String pid = name.substring(0, name.length() - suffix.length());
        if (pid.isEmpty() || pid.length() > 18 || !pid.chars().allMatch(Character::isDigit)) return OptionalLong.empty();
        return OptionalLong.of(Long.parseLong(pid));
    }
}
