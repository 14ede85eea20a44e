package dev.vmmkit.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;

import dev.vmmkit.driver.cuda.CudaDriver;
import picocli.CommandLine;

class DriverBenchCommandTest {
    /** One row of the table: the operation, then n, median and p90 (microseconds). */
    private static final Pattern ROW = Pattern.compile("(.+?)\\s+(\\d+)\\s+(\\S+)\\s+(\\S+)");

    @Test
    void withoutAGpuItFailsCleanly() {
        assumeFalse(CudaDriver.isAvailable(), "a GPU is here");
        assertEquals(1, VmmkitCli.run("driver-bench", "--iterations", "10"));
    }

    @Test
    void unknownDriverIsAUsageError() {
        assertEquals(2, VmmkitCli.run("driver-bench", "--driver", "nonsense"));
    }

    @Test
    void firstPrintsOneLineOfTheFirstAllocationsCallsAfterEachKindOfStart() {
        for (FirstAllocationTiming.Before before : FirstAllocationTiming.Before.values()) {
            if (before == FirstAllocationTiming.Before.SETTLED) continue; // the same steps as SMALL, then a sleep
            ByteArrayOutputStream bytes = new ByteArrayOutputStream();
            int exit = new CommandLine(new DriverBenchCommand(new PrintStream(bytes, true, StandardCharsets.UTF_8)))
                    .execute("--driver", "host", "--first", "64M", "--first-before", before.name());
            String out = bytes.toString(StandardCharsets.UTF_8).strip();
            assertEquals(0, exit, out);
            assertTrue(out.matches("\\{\"test\":\"java-first\",\"before\":\"" + before.name().toLowerCase(java.util.Locale.ROOT)
                    + "\",\"size\":67108864,\"create_us\":[0-9.]+,\"reserve_us\":[0-9.]+,\"map_us\":[0-9.]+,"
                    + "\"set_access_us\":[0-9.]+,\"total_us\":[0-9.]+}"), out);
        }
    }

    @Test
    void aFirstSizeOffTheGranularityIsAUsageError() {
        assertEquals(2, VmmkitCli.run("driver-bench", "--driver", "host", "--first", "3M"));
    }

    @Test
    void reportsEveryCallKindWithAsManySamplesAsAskedFor() {
        int iterations = 120; // the stitched part times at most 100 rounds
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        int exit = new CommandLine(new DriverBenchCommand(new PrintStream(bytes, true, StandardCharsets.UTF_8)))
                .execute("--driver", "host", "--iterations", String.valueOf(iterations), "--stitch", "4");
        String out = bytes.toString(StandardCharsets.UTF_8);
        assertEquals(0, exit, out);
        assertTrue(out.startsWith("driver-bench: driver=host "), out);
        assertTrue(out.contains(" iterations=" + iterations + " "), out);

        List<String> lines = out.lines().toList();
        int header = lines.indexOf(lines.stream().filter(l -> l.startsWith("operation ")).findFirst().orElseThrow(
                () -> new AssertionError("no table header in:\n" + out)));
        assertTrue(lines.get(header).matches("operation\\s+n\\s+median us\\s+p90 us"), lines.get(header));
        List<String> operations = new ArrayList<>();
        for (String line : lines.subList(header + 1, lines.size())) {
            Matcher row = ROW.matcher(line.strip());
            assertTrue(row.matches(), "a table row: " + line);
            String operation = row.group(1);
            operations.add(operation.replaceAll("\\d+(\\.\\d+)? [KMG]?i?B", "SIZE"));
            int expectedSamples = operation.contains(" over ") || operation.contains("x") && operation.startsWith("map ")
                    ? 100 : iterations;
            assertEquals(expectedSamples, Integer.parseInt(row.group(2)), line);
            double median = Double.parseDouble(row.group(3));
            double p90 = Double.parseDouble(row.group(4));
            assertTrue(Double.isFinite(median) && median >= 0 && p90 >= median, line);
        }
        assertEquals(List.of("map+setAccess+unmap (cached handle, fresh VA)", "create", "release", "map", "setAccess",
                "unmap", "reserve", "addressFree",
                "map 4xSIZE (all maps)", "setAccess over 4xSIZE", "unmap over 4xSIZE",
                "map 1xSIZE", "setAccess over 1xSIZE", "unmap over 1xSIZE"), operations, out);
    }

    @Test
    void aSizeThatIsNotAMultipleOfTheGranularityIsAUsageError() {
        assertEquals(2, VmmkitCli.run("driver-bench", "--driver", "host", "--size", "1000"));
        assertEquals(2, VmmkitCli.run("driver-bench", "--driver", "host", "--iterations", "0"));
    }
}
