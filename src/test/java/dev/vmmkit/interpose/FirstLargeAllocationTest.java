package dev.vmmkit.interpose;

import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.TimingDriver;
import dev.vmmkit.driver.VmmDriver;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The first large allocation's breakdown: which calls it keeps, and the line it prints. */
class FirstLargeAllocationTest {
    private static final long MIB = 1L << 20;

    @Test
    void theLineSplitsTheCallIntoJavaAndEachDriverCall() {
        long t0 = 1_000_000;
        List<TimingDriver.Call> calls = List.of(
                new TimingDriver.Call(DriverCall.CREATE, false, t0 + 10_000, t0 + 30_000, 1024 * MIB),
                new TimingDriver.Call(DriverCall.MEMORY_INFO, true, t0 + 31_000, t0 + 32_000, 0),
                new TimingDriver.Call(DriverCall.MAP, false, t0 + 35_000, t0 + 36_000, 1024 * MIB),
                new TimingDriver.Call(DriverCall.SET_ACCESS, false, t0 + 40_000, t0 + 100_000, 1024 * MIB));
        String line = FirstLargeAllocation.line(1024 * MIB, t0, t0 + 110_000, calls);
        assertEquals("first large allocation 1073741824 bytes: 110.0 us in Java = driver 81.0 us (3 calls) + java 29.0 us; "
                + "java 10.0 | create 1024M 20.0 | java 5.0 | map 1024M 1.0 | java 4.0 | set_access 1024M 60.0 | java 10.0; "
                + "other threads meanwhile: memory_info 1.0", line);
    }

    @Test
    void onlyTheFirstLargeRequestIsTimedAndOnlyItsCallsAreKept() {
        HostDriver host = HostDriver.builder().granularity(64 * 1024).capacity(64 * MIB).build();
        try {
            FirstLargeAllocation first = new FirstLargeAllocation();
            VmmDriver watched = first.watch(0, host);
            assertFalse(first.wants(FirstLargeAllocation.FROM_BYTES - 1), "a small request is not timed");
            long before = watched.create(64 * 1024); // not armed: not kept
            assertTrue(first.wants(FirstLargeAllocation.FROM_BYTES));
            assertFalse(first.wants(FirstLargeAllocation.FROM_BYTES), "one request is timed, once");
            first.begin(0);
            long handle = watched.create(128 * 1024);
            first.end(FirstLargeAllocation.FROM_BYTES);
            watched.release(handle); // after the end: not kept
            watched.release(before);
            List<TimingDriver.Call> kept = ((TimingDriver) watched).calls();
            assertEquals(1, kept.size(), kept.toString());
            assertEquals(DriverCall.CREATE, kept.get(0).call());
            assertEquals(128 * 1024, kept.get(0).bytes());
            assertFalse(first.wants(FirstLargeAllocation.FROM_BYTES), "done");
        } finally {
            host.close();
        }
    }
}
