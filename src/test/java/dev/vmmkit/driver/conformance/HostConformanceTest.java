package dev.vmmkit.driver.conformance;

import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/** Every conformance check against the host emulation, one test each, on a driver of its own. */
class HostConformanceTest {
    /** Small, so the out-of-memory check gets there in a few creates. */
    private static final long CAPACITY = 256L << 20;

    @TestFactory
    Stream<DynamicTest> everyCheckPassesOnTheHostDriver() {
        return DriverConformance.checks().stream().map(check -> DynamicTest.dynamicTest(check.name(), () -> {
            try (HostDriver driver = newDriver()) {
                ConformanceTarget target = ConformanceTarget.of(driver, HostConformanceTest::newDriver, Long.MAX_VALUE);
                CheckResult result = DriverConformance.run(check, target);
                assertPassed(result);
                // The check gave back everything it took.
                assertTrue(driver.usage().isEmpty(), "left behind: " + driver.usage());
                assertEquals(CAPACITY, driver.memoryInfo().freeBytes());
                assertEquals(0, driver.hostEvents().pendingCount());
            }
        }));
    }

    @TestFactory
    Stream<DynamicTest> everyCheckPassesWithASmallGranularity() {
        // 64 KiB granules: the checks must not assume 2 MiB.
        return DriverConformance.checks().stream().map(check -> DynamicTest.dynamicTest(check.name(), () -> {
            try (HostDriver driver = HostDriver.builder().granularity(64 << 10).capacity(16L << 20).build()) {
                CheckResult result = DriverConformance.run(check,
                        ConformanceTarget.of(driver, HostDriver::open, Long.MAX_VALUE));
                assertPassed(result);
                assertTrue(driver.usage().isEmpty(), "left behind: " + driver.usage());
            }
        }));
    }

    /** The emulation has everything a check can ask of a driver: a skipped check is a failure here. */
    private static void assertPassed(CheckResult result) {
        if (result.status() != CheckResult.Status.PASS) fail(result.line(), result.failure());
    }

    private static HostDriver newDriver() {
        return HostDriver.builder().capacity(CAPACITY).build();
    }
}
