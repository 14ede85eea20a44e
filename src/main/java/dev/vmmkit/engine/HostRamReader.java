package dev.vmmkit.engine;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * Host RAM as the process can use it: {@code /proc/meminfo} (MemTotal minus MemAvailable of
 * MemTotal), or the cgroup v2 limit ({@code memory.max} and {@code memory.current}) when that is
 * lower, as in a container.
 */
public final class HostRamReader implements MemoryReader {
    private final Path meminfo;
    private final Path cgroupDir;

    /** Reads the real files. */
    public HostRamReader() {
        this(Path.of("/proc/meminfo"), Path.of("/sys/fs/cgroup"));
    }

    /** Reads the given files instead (tests). */
    public HostRamReader(Path meminfo, Path cgroupDir) {
        this.meminfo = meminfo;
        this.cgroupDir = cgroupDir;
    }

    @Override
    public MemoryFigures read() {
        long total = -1;
        long available = -1;
        try {
            List<String> lines = Files.readAllLines(meminfo);
            for (String line : lines) {
                if (line.startsWith("MemTotal:")) total = kib(line);
                else if (line.startsWith("MemAvailable:")) available = kib(line);
            }
        } catch (IOException | RuntimeException e) {
            return new MemoryFigures(0, 0);
        }
        MemoryFigures host = total > 0 && available >= 0 ? new MemoryFigures(total - available, total) : new MemoryFigures(0, 0);
        long limit = number(cgroupDir.resolve("memory.max"));
        long current = number(cgroupDir.resolve("memory.current"));
        if (limit > 0 && current >= 0 && (host.totalBytes() == 0 || limit < host.totalBytes())) {
            return new MemoryFigures(current, limit);
        }
        return host;
    }

    private static long kib(String line) {
        String[] parts = line.trim().split("\\s+");
        return Long.parseLong(parts[1]) * 1024;
    }

    /** A number from a cgroup file; -1 when absent or "max". */
    private static long number(Path file) {
        try {
            String text = Files.readString(file).trim();
            return text.equals("max") ? -1 : Long.parseLong(text);
        } catch (IOException | RuntimeException e) {
            return -1;
        }
    }
}
