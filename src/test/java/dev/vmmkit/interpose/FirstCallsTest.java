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

/** The breakdowns of a process's first calls: which calls they keep, and the lines they print. */
class FirstCallsTest {
    private static final long MIB = 1L << 20;

    @Test
    void theLineSplitsTheCallIntoJavaAndEachDriverCall() {
        long t0 = 1_000_000;
        List<TimingDriver.Call> calls = List.of(
                new TimingDriver.Call(DriverCall.CREATE, false, t0 + 10_000, t0 + 30_000, 1024 * MIB),
                new TimingDriver.Call(DriverCall.MEMORY_INFO, true, t0 + 31_000, t0 + 32_000, 0),
                new TimingDriver.Call(DriverCall.MAP, false, t0 + 35_000, t0 + 36_000, 1024 * MIB),
                new TimingDriver.Call(DriverCall.SET_ACCESS, false, t0 + 40_000, t0 + 100_000, 1024 * MIB));
        String line = FirstCalls.line(FirstCalls.Kind.LARGE_ALLOCATION, 1024 * MIB, t0, t0 + 110_000, calls);
        assertEquals("first large allocation 1073741824 bytes: 110.0 us in Java = driver 81.0 us (3 calls) + java 29.0 us; "
                + "java 10.0 | create 1024M 20.0 | java 5.0 | map 1024M 1.0 | java 4.0 | set_access 1024M 60.0 | java 10.0; "
                + "other threads meanwhile: memory_info 1.0", line);
    }

    @Test
    void onlyTheFirstLargeRequestIsTimedAndOnlyItsCallsAreKept() {
        HostDriver host = HostDriver.builder().granularity(64 * 1024).capacity(64 * MIB).build();
        try {
            FirstCalls first = new FirstCalls();
            VmmDriver watched = first.watch(0, host);
            assertFalse(first.wants(FirstCalls.FROM_BYTES - 1), "a small request is not timed");
            long before = watched.create(64 * 1024); // not armed: not kept
            assertTrue(first.wants(FirstCalls.FROM_BYTES));
            assertFalse(first.wants(FirstCalls.FROM_BYTES), "one request is timed, once");
            first.begin(FirstCalls.Kind.LARGE_ALLOCATION, 0);
            long handle = watched.create(128 * 1024);
            first.end(FirstCalls.Kind.LARGE_ALLOCATION, FirstCalls.FROM_BYTES);
            watched.release(handle); // after the end: not kept
            watched.release(before);
            List<TimingDriver.Call> kept = first.calls(FirstCalls.Kind.LARGE_ALLOCATION);
            assertEquals(1, kept.size(), kept.toString());
            assertEquals(DriverCall.CREATE, kept.get(0).call());
            assertEquals(128 * 1024, kept.get(0).bytes());
            assertFalse(first.wants(FirstCalls.FROM_BYTES), "done");
        } finally {
            host.close();
        }
    }

    @Test
    void aPauseIsTimedOnEveryDeviceOnceAndItsLineHasNoSize() {
        HostDriver zero = HostDriver.builder().granularity(64 * 1024).capacity(64 * MIB).build();
        HostDriver one = HostDriver.builder().granularity(64 * 1024).capacity(64 * MIB).build();
        try {
            FirstCalls first = new FirstCalls();
            VmmDriver onZero = first.watch(0, zero);
            VmmDriver onOne = first.watch(1, one);
            assertTrue(first.wants(FirstCalls.Kind.PAUSE));
            assertTrue(first.wants(FirstCalls.Kind.RESUME), "each kind is timed once of its own");
            assertFalse(first.wants(FirstCalls.Kind.PAUSE), "a pause is timed once");
            first.begin(FirstCalls.Kind.PAUSE, -1);
            long a = onZero.create(64 * 1024);
            long b = onOne.create(64 * 1024);
            first.end(FirstCalls.Kind.PAUSE, 0);
            onZero.release(a);
            onOne.release(b);
            List<TimingDriver.Call> kept = first.calls(FirstCalls.Kind.PAUSE);
            assertEquals(2, kept.size(), "each device's create, not its release: " + kept);
            assertTrue(first.calls(FirstCalls.Kind.LARGE_ALLOCATION).isEmpty(), "another kind keeps nothing of the pause");
            String line = FirstCalls.line(FirstCalls.Kind.PAUSE, 0, 0, 5_000, List.of(
                    new TimingDriver.Call(DriverCall.UNMAP, false, 1_000, 3_000, 8192 * MIB)));
            assertEquals("first pause: 5.0 us in Java = driver 2.0 us (1 calls) + java 3.0 us; java 1.0 | unmap 8192M 2.0 | java 2.0",
                    line);
        } finally {
            zero.close();
            one.close();
        }
    }

    @Test
    void aDriverOpenedInsideTheTimedCallIsTimedFromItsFirstCall() {
        HostDriver host = HostDriver.builder().granularity(64 * 1024).capacity(64 * MIB).build();
        try {
            FirstCalls first = new FirstCalls();
            assertTrue(first.wants(FirstCalls.FROM_BYTES));
            first.begin(FirstCalls.Kind.LARGE_ALLOCATION, 0);
            VmmDriver opened = first.watch(0, host); // the device's first allocation opens its driver
            long handle = opened.create(64 * 1024);
            first.end(FirstCalls.Kind.LARGE_ALLOCATION, FirstCalls.FROM_BYTES);
            opened.release(handle);
            List<TimingDriver.Call> kept = first.calls(FirstCalls.Kind.LARGE_ALLOCATION);
            assertEquals(1, kept.size(), kept.toString());
            assertEquals(DriverCall.CREATE, kept.get(0).call());
        } finally {
            host.close();
        }
    }
}
