package dev.vmmkit.driver.conformance;

import dev.vmmkit.driver.CallText;
import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DeviceBytes;
import dev.vmmkit.driver.DriverAdaptor;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.VmmDriver;

import java.util.Set;

/**
 * What the checks of {@link DriverConformance} assert with: a failed expectation is an
 * {@link AssertionError} naming what was wrong; a call that must fail is run and its code and
 * message checked; a check that only the strict emulation can make is skipped on other drivers.
 */
final class Expectations {
    /** Codes accepted for invalid arguments. */
    static final Set<Integer> INVALID_CODES = Set.of(CudaResult.INVALID_VALUE, CudaResult.NOT_SUPPORTED);

    private Expectations() {
    }

    /** Invalid arguments: CUDA answers INVALID_VALUE, or NOT_SUPPORTED for a map size other than the handle's. */
    static void expectInvalid(String what, Runnable call, String... mentions) {
        expectError(what, call, INVALID_CODES, mentions);
    }

    /**
     * Skips a check of a misuse that the emulation refuses but CUDA does not (measured on an H200,
     * driver 580): the emulation is stricter on purpose, so that the allocator's tests catch it.
     */
    static void requireStrictEmulation(ConformanceTarget target, String why) {
        if (!"host".equals(DriverAdaptor.innermost(target.driver()).name())) {
            throw new CheckSkipped("emulation only: " + why);
        }
    }

    /** Runs {@code call}, which must throw a DriverException with one of {@code codes} whose call text names each of {@code mentions}. */
    static DriverException expectError(String what, Runnable call, Set<Integer> codes, String... mentions) {
        try {
            call.run();
        } catch (DriverException e) {
            if (!codes.contains(e.result())) {
                throw new AssertionError(what + ": expected " + names(codes) + ", got " + e.getMessage(), e);
            }
            expectMentions(e, mentions);
            return e;
        }
        throw new AssertionError(what + ": succeeded, expected " + names(codes));
    }

    static void expectMentions(DriverException e, String... mentions) {
        for (String mention : mentions) {
            if (!e.call().contains(mention)) {
                throw new AssertionError("the message does not name '" + mention + "': " + e.getMessage(), e);
            }
        }
    }

    static void expectPattern(DeviceBytes bytes, long va, long size, long seed, String what) {
        long mismatch = bytes.firstMismatch(va, size, seed);
        if (mismatch >= 0) {
            throw new AssertionError(what + ": wrong data at " + CallText.hex(va + mismatch)
                    + " (offset " + CallText.hex(mismatch) + " of " + CallText.hex(size) + ")");
        }
    }

    static void expect(boolean condition, String failure) {
        if (!condition) {
            throw new AssertionError(failure);
        }
    }

    static void expectEqual(Object expected, Object actual, String what) {
        if (!expected.equals(actual)) {
            throw new AssertionError(what + ": expected " + expected + ", got " + actual);
        }
    }

    static void expectCount(long expected, long actual, String what) {
        if (expected != actual) {
            throw new AssertionError(what + ": expected " + expected + ", got " + actual);
        }
    }

    static void expectWord(long expected, long actual, String what) {
        if (expected != actual) {
            throw new AssertionError(what + ": expected " + CallText.hex(expected) + ", got " + CallText.hex(actual));
        }
    }

    /** A call expected to fail succeeded: give back what it took before the check reports it. */
    static void giveBackIfReserved(VmmDriver driver, long va, long size) {
        try {
            driver.addressFree(va, size);
        } catch (DriverException ignored) {
            // The failure being reported is that reserve succeeded.
        }
    }

    static void giveBackIfCreated(VmmDriver driver, long handle) {
        try {
            driver.release(handle);
        } catch (DriverException ignored) {
            // The failure being reported is that create succeeded.
        }
    }

    static String names(Set<Integer> codes) {
        return codes.stream().sorted().map(CudaResult::name).reduce((a, b) -> a + " or " + b).orElse("");
    }
}
