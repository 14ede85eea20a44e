package dev.vmmkit.driver.conformance;

import dev.vmmkit.driver.CallText;
import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DeviceBytes;
import dev.vmmkit.driver.VmmDriver;

import java.util.Set;

import static dev.vmmkit.driver.conformance.Expectations.expectError;
import static dev.vmmkit.driver.conformance.Expectations.expectInvalid;
import static dev.vmmkit.driver.conformance.Expectations.expectPattern;
import static dev.vmmkit.driver.conformance.Expectations.giveBackIfCreated;
import static dev.vmmkit.driver.conformance.Expectations.giveBackIfReserved;
import static dev.vmmkit.driver.conformance.Expectations.requireStrictEmulation;

/**
 * The error checks of {@link DriverConformance}: a refused call gives the right code and a message
 * naming the call, and changes no state (the memory around it still holds its data).
 */
final class ErrorChecks {
    /** Codes accepted for a released handle: the documented INVALID_VALUE, or INVALID_HANDLE. */
    private static final Set<Integer> RELEASED_HANDLE_CODES = Set.of(CudaResult.INVALID_VALUE, CudaResult.INVALID_HANDLE);
    /** Codes accepted for a size too large for any address space: invalid, or no room for it. */
    private static final Set<Integer> HUGE_SIZE_CODES = Set.of(CudaResult.INVALID_VALUE, CudaResult.OUT_OF_MEMORY);

    static void errorMapOverMappedRange(ConformanceTarget target) {
        VmmDriver driver = target.driver();
        DeviceBytes bytes = target.bytes();
        long g = driver.granularity();
        try (Scratch scratch = new Scratch(driver)) {
            long va = scratch.reserve(2 * g);
            scratch.mapWithAccess(va, g, scratch.create(g));
            bytes.fill(va, g, 51);
            long other = scratch.create(g);
            long large = scratch.create(2 * g);
            expectInvalid("map over a mapped range", () -> driver.map(va, g, other),
                    "cuMemMap", CallText.hex(va), CallText.hex(g));
            expectInvalid("map partly over a mapped range", () -> driver.map(va, 2 * g, large),
                    "cuMemMap", CallText.hex(va), CallText.hex(2 * g));
            expectPattern(bytes, va, g, 51, "the mapping after refused maps over it");
            scratch.mapWithAccess(va + g, g, other);
            bytes.fill(va + g, g, 52);
            expectPattern(bytes, va + g, g, 52, "a map next to the mapping");
        }
    }

    static void errorUnmapOfUnmappedRange(ConformanceTarget target) {
        requireStrictEmulation(target, "CUDA 580 returns success for an unmap of reserved space that was never mapped");
        VmmDriver driver = target.driver();
        DeviceBytes bytes = target.bytes();
        long g = driver.granularity();
        try (Scratch scratch = new Scratch(driver)) {
            long va = scratch.reserve(4 * g);
            expectInvalid("unmap of a range never mapped", () -> driver.unmap(va, g),
                    "cuMemUnmap", CallText.hex(va), CallText.hex(g));
            scratch.mapWithAccess(va, g, scratch.create(g));
            scratch.mapWithAccess(va + 2 * g, 2 * g, scratch.create(2 * g));
            bytes.fill(va, g, 61);
            expectInvalid("unmap of a mapping plus unmapped space", () -> driver.unmap(va, 2 * g),
                    "cuMemUnmap", CallText.hex(va), CallText.hex(2 * g));
            expectInvalid("unmap of half a mapping", () -> driver.unmap(va + 2 * g, g),
                    "cuMemUnmap", CallText.hex(va + 2 * g), CallText.hex(g));
            expectPattern(bytes, va, g, 61, "the mapping after refused unmaps");
            scratch.unmap(va, g);
            scratch.unmap(va + 2 * g, 2 * g);
            expectInvalid("second unmap of the same range", () -> driver.unmap(va, g),
                    "cuMemUnmap", CallText.hex(va));
        }
    }

    static void errorSetAccessOnUnmappedRange(ConformanceTarget target) {
        VmmDriver driver = target.driver();
        DeviceBytes bytes = target.bytes();
        long g = driver.granularity();
        try (Scratch scratch = new Scratch(driver)) {
            long va = scratch.reserve(2 * g);
            expectInvalid("setAccess on reserved space", () -> driver.setAccess(va, g),
                    "cuMemSetAccess", CallText.hex(va), CallText.hex(g));
            scratch.map(va, g, scratch.create(g));
            expectInvalid("setAccess over a mapping and unmapped space", () -> driver.setAccess(va, 2 * g),
                    "cuMemSetAccess", CallText.hex(va), CallText.hex(2 * g));
            driver.setAccess(va, g);
            bytes.fill(va, g, 71);
            expectPattern(bytes, va, g, 71, "the mapping after the refused setAccess");
        }
    }

    static void errorMisaligned(ConformanceTarget target) {
        VmmDriver driver = target.driver();
        DeviceBytes bytes = target.bytes();
        long g = driver.granularity();
        long half = g / 2;
        try (Scratch scratch = new Scratch(driver)) {
            expectInvalid("reserve of a size that is not a multiple of the granularity",
                    () -> giveBackIfReserved(driver, driver.reserve(g + half, 0), g + half),
                    "cuMemAddressReserve", CallText.hex(g + half));
            expectInvalid("create of a size that is not a multiple of the granularity",
                    () -> giveBackIfCreated(driver, driver.create(half)), "cuMemCreate", CallText.hex(half));
            long va = scratch.reserve(2 * g);
            long handle = scratch.create(g);
            expectInvalid("map at a misaligned address", () -> driver.map(va + half, g, handle),
                    "cuMemMap", CallText.hex(va + half));
            expectInvalid("map with a size other than the handle's", () -> driver.map(va, 2 * g, handle),
                    "cuMemMap", CallText.hex(2 * g));
            scratch.map(va, g, handle);
            expectInvalid("setAccess at a misaligned address", () -> driver.setAccess(va + half, half),
                    "cuMemSetAccess", CallText.hex(va + half));
            expectInvalid("unmap at a misaligned address", () -> driver.unmap(va + half, half),
                    "cuMemUnmap", CallText.hex(va + half));
            driver.setAccess(va, g);
            bytes.fill(va, g, 81);
            expectPattern(bytes, va, g, 81, "the mapping after refused misaligned calls");
        }
    }

    static void errorSizeZero(ConformanceTarget target) {
        VmmDriver driver = target.driver();
        long g = driver.granularity();
        try (Scratch scratch = new Scratch(driver)) {
            expectInvalid("reserve of size 0", () -> giveBackIfReserved(driver, driver.reserve(0, 0), 0),
                    "cuMemAddressReserve", "size=0x0");
            expectInvalid("create of size 0", () -> giveBackIfCreated(driver, driver.create(0)),
                    "cuMemCreate", "size=0x0");
            long va = scratch.reserve(g);
            long handle = scratch.create(g);
            expectInvalid("map of size 0", () -> driver.map(va, 0, handle), "cuMemMap", CallText.hex(va));
            scratch.map(va, g, handle);
            expectInvalid("setAccess of size 0", () -> driver.setAccess(va, 0), "cuMemSetAccess", CallText.hex(va));
            expectInvalid("unmap of size 0", () -> driver.unmap(va, 0), "cuMemUnmap", CallText.hex(va));
            driver.setAccess(va, g);
            target.bytes().fill(va, g, 91);
            expectPattern(target.bytes(), va, g, 91, "the mapping after refused calls of size 0");
        }
    }

    /** Sizes near 2^64 (negative as a long): rejected, and address plus size must not wrap around. */
    static void errorSizeOverflow(ConformanceTarget target) {
        VmmDriver driver = target.driver();
        long g = driver.granularity();
        long huge = -g; // 0xffff_ffff_ffe0_0000 for 2 MiB: aligned, but no address space holds it
        try (Scratch scratch = new Scratch(driver)) {
            expectError("reserve of a size near 2^64", () -> giveBackIfReserved(driver, driver.reserve(huge, 0), huge),
                    HUGE_SIZE_CODES, "cuMemAddressReserve", CallText.hex(huge));
            expectError("create of a size near 2^64", () -> giveBackIfCreated(driver, driver.create(huge)),
                    HUGE_SIZE_CODES, "cuMemCreate", CallText.hex(huge));
            long va = scratch.reserve(g);
            long handle = scratch.create(g);
            expectInvalid("map whose end wraps around", () -> driver.map(va, huge, handle),
                    "cuMemMap", CallText.hex(huge));
            scratch.mapWithAccess(va, g, handle);
            expectInvalid("setAccess whose end wraps around", () -> driver.setAccess(va, huge),
                    "cuMemSetAccess", CallText.hex(huge));
            expectInvalid("unmap whose end wraps around", () -> driver.unmap(va, huge),
                    "cuMemUnmap", CallText.hex(huge));
            target.bytes().fill(va, g, 101);
            expectPattern(target.bytes(), va, g, 101, "the mapping after refused huge sizes");
        }
    }

    static void errorAddressOutsideReservations(ConformanceTarget target) {
        VmmDriver driver = target.driver();
        long g = driver.granularity();
        try (Scratch scratch = new Scratch(driver)) {
            long freed = scratch.reserve(2 * g);
            long kept = scratch.reserve(g); // reserved before freeing, so it cannot reuse the freed range
            scratch.addressFree(freed);
            long handle = scratch.create(g);
            long large = scratch.create(2 * g);
            expectInvalid("map at a freed reservation", () -> driver.map(freed, g, handle),
                    "cuMemMap", CallText.hex(freed));
            expectInvalid("map at address 0", () -> driver.map(0, g, handle), "cuMemMap", "va=0x0");
            expectInvalid("map running past the end of a reservation", () -> driver.map(kept, 2 * g, large),
                    "cuMemMap", CallText.hex(kept), CallText.hex(2 * g));
            scratch.mapWithAccess(kept, g, handle);
            target.bytes().fill(kept, g, 111);
            expectPattern(target.bytes(), kept, g, 111, "a map inside the reservation after refused ones");
        }
    }

    static void errorReleasedHandle(ConformanceTarget target) {
        requireStrictEmulation(target, "CUDA 580 crashes in libcuda (SIGSEGV) on a released handle instead of returning an error");
        VmmDriver driver = target.driver();
        long g = driver.granularity();
        try (Scratch scratch = new Scratch(driver)) {
            long va = scratch.reserve(g);
            long handle = scratch.create(g);
            scratch.release(handle);
            expectError("map of a released handle", () -> driver.map(va, g, handle),
                    RELEASED_HANDLE_CODES, "cuMemMap", CallText.hex(handle));
            expectError("release of a released handle", () -> driver.release(handle),
                    RELEASED_HANDLE_CODES, "cuMemRelease", CallText.hex(handle));
            scratch.mapWithAccess(va, g, scratch.create(g));
            target.bytes().fill(va, g, 121);
            expectPattern(target.bytes(), va, g, 121, "a new handle after refused uses of a released one");
        }
    }

    private ErrorChecks() {
    }
}
