package dev.vmmkit.interpose;

import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The start-up warm-up: off when asked, and once its threads end it says it no longer runs and what it did. */
class StartUpWarmUpTest {

    @Test
    void itIsOffWhenTheSettingSaysSo() {
        assertNull(StartUpWarmUp.start(Map.of(StartUpWarmUp.SETTING, "0"), () -> { }));
    }

    @Test
    void onTheEmulationOneThreadRunsTheAllocatorAndATagsCyclesAndThenItReportsThem() {
        assertTimeoutPreemptively(Duration.ofSeconds(60), () -> {
            Thread allocator = StartUpWarmUp.start(Map.of("VMM_DRIVER", "host"), () -> { });
            assertNotNull(allocator);
            allocator.join();
            assertFalse(StartUpWarmUp.running(), "no CUDA thread on the emulation, and the allocator's has ended");
            String summary = StartUpWarmUp.summary();
            // Another test may have stopped the warm-up (a session's exit does): the rounds run are not fixed.
            assertTrue(summary.matches("start-up warm-up: allocator \\d+ rounds in [0-9.]+ ms, a tag \\d+ cycles in [0-9.]+ ms, CUDA downcalls linked in [0-9.]+ ms"),
                    summary);
        });
    }
}
