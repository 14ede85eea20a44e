package dev.vmmkit.core;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** {@link VmmConfig#problems}: what the environment may hold, each problem one line naming variable, value and rule. */
class VmmConfigProblemsTest {

    @ParameterizedTest(name = "{0}={1}")
    @CsvSource({
            "VMM_CHUNK_SIZE, 3M, power of two",
            "VMM_CHUNK_SIZE, 6M, power of two",
            "VMM_CHUNK_SIZE, 1M, at least 2 MiB",
            "VMM_CHUNK_SIZE, lots, not a size",
            "VMM_CHUNK_SIZE, -1, not a size",
            "VMM_VA_SIZE, 1K, at least 1G",
            "VMM_VA_SIZE, 64M, at least 1G",
            "VMM_ALIGNMENT, 100, power of two",
            "VMM_RESERVE_SLACK, abc, not a number",
            "VMM_FRAG_RATIO, 2, [0,1]",
    })
    void aBadValueIsOneLineNamingVariableValueAndRule(String key, String value, String rule) {
        List<String> problems = VmmConfig.problems(Map.of(key, value));
        assertEquals(1, problems.size(), problems::toString);
        String line = problems.getFirst();
        assertTrue(line.startsWith(key + "=" + value + ": "), line);
        assertTrue(line.contains(rule), line);
        assertTrue(!line.contains("\n"), "one line");
    }

    @ParameterizedTest(name = "{0}={1}")
    @CsvSource({"VMM_CHUNK_SIZE, 2M", "VMM_CHUNK_SIZE, 8M", "VMM_CHUNK_SIZE, 0", "VMM_VA_SIZE, 1G",
            "VMM_VA_SIZE, 0", "VMM_VA_SIZE, 4T", "VMM_RESERVE_SLACK, 1.5", "VMM_SMALL_LIMIT, ' '"})
    void goodValuesHaveNoProblem(String key, String value) {
        assertEquals(List.of(), VmmConfig.problems(Map.of(key, value)));
    }

    @Test
    void everyProblemIsReportedNotJustTheFirst() {
        assertEquals(3, VmmConfig.problems(Map.of("VMM_CHUNK_SIZE", "3M", "VMM_VA_SIZE", "1K", "VMM_FRAG_RATIO", "x")).size());
    }

    @Test
    void aPowerOfTwoChunkIsWhatTheAllocatorNeeds() {
        // The rule is not arbitrary: the allocator refuses a 3M chunk at its first allocation.
        try (var driver = dev.vmmkit.driver.host.HostDriver.builder().capacity(1L << 30).build();
             VmmManager manager = new VmmManager(driver, VmmConfig.DEFAULTS.withChunkBytes(3L << 20))) {
            org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, () -> manager.allocate(4096, 0));
        }
    }
}
