package dev.vmmkit.tools.run;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.vmmkit.interpose.RunParts;
import dev.vmmkit.interpose.StatsWriter;
import dev.vmmkit.trace.TraceFiles;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * The stats file and trace of a {@code vmmkit run} whose program may start several CUDA processes:
 * a folder where each process writes its parts ({@link RunParts}), and, once the program has
 * ended, the parts put in place. The stats parts become one file ({@link MergedStats}). Traces are
 * not merged (each process has its own addresses): the process that recorded the most keeps the
 * trace's path, each other one gets the path with its pid before the extension
 * ({@code trace.4711.csv.gz}), and a line names them all.
 */
public final class RunOutputs implements AutoCloseable {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final Path folder;

    private RunOutputs(Path folder) {
        this.folder = folder;
    }

    /**
     * The run's parts folder, named in {@code env} for the program, when {@code env} asks for a
     * stats file or a trace; else one that collects nothing.
     */
    public static RunOutputs forProgram(Map<String, String> env) throws IOException {
        Path folder = null;
        for (RunParts.Output output : RunParts.Output.values()) {
            String target = env.get(output.variable());
            if (target == null || target.isBlank()) continue;
            if (folder == null) folder = Files.createTempDirectory("vmmkit-run-parts-");
            env.put(output.collectedVariable(), target);
        }
        if (folder != null) env.put(RunParts.ENVIRONMENT, folder.toString());
        return new RunOutputs(folder);
    }

    /** Writes the processes' stats as {@code target}; false when no process wrote any (it made no CUDA call). */
    public boolean collectStats(Path target) throws IOException {
        List<MergedStats.Part> parts = new ArrayList<>();
        for (Path part : parts(RunParts.Output.STATS, target)) {
            long pid = RunParts.pidOf(part, RunParts.Output.STATS, target).orElseThrow();
            JsonNode stats;
            try {
                stats = JSON.readTree(part.toFile());
            } catch (IOException e) {
                stats = null;
            }
            // A file that cannot be read counts as a process that did not finish.
            if (stats == null || !stats.isObject()) stats = JSON.createObjectNode().put("complete", false);
            parts.add(new MergedStats.Part(pid, stats));
        }
        if (parts.isEmpty()) return false;
        StatsWriter.write(target, JSON.writeValueAsString(MergedStats.of(parts)) + "\n");
        return true;
    }

    /**
     * Puts the processes' traces in place for {@code target} (those with no request are dropped);
     * returns the lines to print: none when at most one process recorded.
     */
    public List<String> collectTraces(Path target) throws IOException {
        List<Path> recorded = new ArrayList<>();
        for (Path part : parts(RunParts.Output.TRACE, target)) if (TraceFiles.hasRequests(part)) recorded.add(part);
        if (recorded.isEmpty()) return List.of();
        recorded.sort(Comparator.comparingLong(RunOutputs::size).reversed());
        List<String> names = new ArrayList<>();
        for (int i = 0; i < recorded.size(); i++) {
            Path part = recorded.get(i);
            long pid = RunParts.pidOf(part, RunParts.Output.TRACE, target).orElseThrow();
            Path destination = i == 0 ? target : withPid(target, pid);
            Files.move(part, destination, StandardCopyOption.REPLACE_EXISTING);
            names.add(destination + " (pid " + pid + (i == 0 ? ", the most requests)" : ")"));
        }
        if (recorded.size() == 1) return List.of();
        return List.of(recorded.size() + " processes recorded requests, each into a trace of its own: " + String.join(", ", names));
    }

    /** {@code target} with {@code pid} before its extension: {@code t.csv.gz} -> {@code t.4711.csv.gz}. */
    static Path withPid(Path target, long pid) {
        String name = String.valueOf(target.getFileName());
        String gz = name.endsWith(".gz") ? ".gz" : "";
        String base = name.substring(0, name.length() - gz.length());
        int dot = base.lastIndexOf('.');
        String stem = dot > 0 ? base.substring(0, dot) : base;
        String extension = dot > 0 ? base.substring(dot) : "";
        return target.resolveSibling(stem + "." + pid + extension + gz);
    }

    /** Deletes the parts folder and whatever is left in it. */
    @Override
    public void close() throws IOException {
        if (folder == null) return;
        try (Stream<Path> left = Files.list(folder)) {
            for (Path path : left.toList()) Files.deleteIfExists(path);
        }
        Files.deleteIfExists(folder);
    }

    private List<Path> parts(RunParts.Output output, Path target) throws IOException {
        if (folder == null) return List.of();
        try (Stream<Path> all = Files.list(folder)) {
            return all.filter(path -> RunParts.pidOf(path, output, target).isPresent()).sorted().toList();
        }
    }

    private static long size(Path path) {
        try {
            return Files.size(path);
        } catch (IOException e) {
            return 0;
        }
    }
}
