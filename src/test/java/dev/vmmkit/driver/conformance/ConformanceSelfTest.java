package dev.vmmkit.driver.conformance;

import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.FaultInjectingDriver;
import dev.vmmkit.driver.FaultPlan;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The suite must catch broken drivers, report them in one line, and still give everything back. */
class ConformanceSelfTest {

    @Test
    void aDriverWhoseSetAccessAlwaysFailsFailsTheDataChecksAndLeaksNothing() {
        try (HostDriver host = HostDriver.builder().capacity(256L << 20).build()) {
            FaultPlan plan = new FaultPlan().failAlways(DriverCall.SET_ACCESS, CudaResult.NOT_PERMITTED);
            FaultInjectingDriver broken = new FaultInjectingDriver(host, plan);
            Map<String, CheckResult> results = byName(DriverConformance.runAll(
                    new ConformanceTarget(broken, host.deviceBytes(), HostDriver::open, Long.MAX_VALUE)));

            CheckResult mapWriteRead = results.get("map_write_read");
            assertEquals(CheckResult.Status.FAIL, mapWriteRead.status());
            assertTrue(mapWriteRead.line().startsWith("FAIL map_write_read: cuMemSetAccess("), mapWriteRead.line());
            assertTrue(mapWriteRead.line().contains("CUDA_ERROR_NOT_PERMITTED"), mapWriteRead.line());
            assertEquals(-1, mapWriteRead.line().indexOf('\n'), "one line");
            assertEquals(CheckResult.Status.PASS, results.get("memory_info_is_consistent").status());
            assertTrue(host.usage().isEmpty(), "left behind: " + host.usage());
        }
    }

    @Test
    void aDriverThatAcceptsBadUnmapsFailsTheUnmapCheck() {
        try (HostDriver host = HostDriver.open()) {
            // A driver that swallows unmap errors, as bookkeeping out of step with the driver would.
            CheckResult result = DriverConformance.run(check("error_unmap_of_unmapped_or_partial_range"),
                    new ConformanceTarget(new SwallowingUnmapDriver(host), host.deviceBytes(), null, 0));
            assertEquals(CheckResult.Status.FAIL, result.status());
            assertTrue(result.message().contains("succeeded, expected CUDA_ERROR_INVALID_VALUE"), result.message());
            assertTrue(host.usage().isEmpty(), "left behind: " + host.usage());
        }
    }

    @Test
    void checksThatCannotRunAreSkippedWithAReason() {
        try (HostDriver host = HostDriver.open()) {
            ConformanceTarget target = new ConformanceTarget(host, host.deviceBytes(), null, 1L << 20);
            CheckResult oom = DriverConformance.run(check("out_of_memory_is_recognisable"), target);
            assertEquals(CheckResult.Status.SKIP, oom.status());
            assertTrue(oom.line().startsWith("SKIP out_of_memory_is_recognisable: device has 81920 MiB free"), oom.line());
            assertEquals(CheckResult.Status.SKIP,
                    DriverConformance.run(check("closed_driver_reports_deinitialized"), target).status());
        }
    }

    @Test
    void checkNamesAreUniqueAndSnakeCase() {
        List<String> names = DriverConformance.checks().stream().map(DriverConformance.Check::name).toList();
        assertEquals(names.size(), names.stream().distinct().count());
        names.forEach(name -> assertTrue(name.matches("[a-z0-9_]+"), name));
    }

    private static DriverConformance.Check check(String name) {
        return DriverConformance.checks().stream().filter(c -> c.name().equals(name)).findFirst().orElseThrow();
    }

    private static Map<String, CheckResult> byName(List<CheckResult> results) {
        return results.stream().collect(Collectors.toMap(CheckResult::name, r -> r));
    }

    /** Forwards everything but pretends failed unmaps succeeded. */
    private static final class SwallowingUnmapDriver extends ForwardingTestDriver {
        SwallowingUnmapDriver(HostDriver host) {
            super(host);
        }

        @Override
        public void unmap(long va, long size) {
            try {
                super.unmap(va, size);
            } catch (DriverException ignored) {
                // The bug under test.
            }
        }
    }
}
