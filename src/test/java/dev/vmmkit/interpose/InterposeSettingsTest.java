package dev.vmmkit.interpose;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class InterposeSettingsTest {

    @ParameterizedTest
    @ValueSource(strings = {"0", "-5", "abc", "-5M"})
    void aDeviceMemoryThatIsNotAPositiveSizeNamesTheVariable(String value) {
        List<String> problems = InterposeSettings.problems(Map.of("VMM_DEVICE_MEMORY", value));
        assertEquals(1, problems.size(), problems::toString);
        assertTrue(problems.getFirst().startsWith("VMM_DEVICE_MEMORY=" + value + ": must be a size above 0"), problems.getFirst());
    }

    @Test
    void modeAndDriverAreChecked() {
        assertEquals(List.of("VMM_MODE=fast: must be monitor or vmm", "VMM_DRIVER=opencl: must be cuda or host"),
                InterposeSettings.problems(Map.of("VMM_MODE", "fast", "VMM_DRIVER", "opencl")));
    }

    @Test
    void switchesAreZeroOrOne() {
        assertEquals(List.of("VMM_ZERO_COPY=yes: must be 0 or 1"),
                InterposeSettings.problems(Map.of("VMM_ZERO_COPY", "yes")));
        assertEquals(List.of(), InterposeSettings.problems(Map.of("VMM_ZERO_COPY", "1")));
    }

    @Test
    void allocatorSettingsAreCheckedToo() {
        List<String> problems = InterposeSettings.problems(Map.of("VMM_CHUNK_SIZE", "3M", "VMM_DEVICE_MEMORY", "64M"));
        assertEquals(1, problems.size(), problems::toString);
        assertTrue(problems.getFirst().startsWith("VMM_CHUNK_SIZE=3M: "));
    }

    @Test
    void aGoodEnvironmentHasNoProblem() {
        assertEquals(List.of(), InterposeSettings.problems(Map.of("VMM_MODE", "vmm", "VMM_DRIVER", "host",
                "VMM_DEVICE_MEMORY", "64M", "VMM_CHUNK_SIZE", "4M", "PATH", "/bin")));
    }
}
