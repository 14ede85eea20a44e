package dev.vmmkit.driver.conformance;

import dev.vmmkit.driver.DeviceBytes;

import dev.vmmkit.driver.CallText;
import dev.vmmkit.driver.CountingDriver;
import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.DriverCallCounts;
import dev.vmmkit.driver.DeviceSet;
import dev.vmmkit.driver.Descriptors;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.FaultInjectingDriver;
import dev.vmmkit.driver.FaultPlan;
import dev.vmmkit.driver.StreamEvents;
import dev.vmmkit.driver.VmmDriver;

import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static dev.vmmkit.driver.conformance.Expectations.expect;
import static dev.vmmkit.driver.conformance.Expectations.expectCount;
import static dev.vmmkit.driver.conformance.Expectations.expectEqual;
import static dev.vmmkit.driver.conformance.Expectations.expectError;
import static dev.vmmkit.driver.conformance.Expectations.expectInvalid;
import static dev.vmmkit.driver.conformance.Expectations.expectMentions;
import static dev.vmmkit.driver.conformance.Expectations.expectPattern;
import static dev.vmmkit.driver.conformance.Expectations.expectWord;
import static dev.vmmkit.driver.conformance.Expectations.giveBackIfCreated;
import static dev.vmmkit.driver.conformance.Expectations.giveBackIfReserved;
import static dev.vmmkit.driver.conformance.Expectations.requireStrictEmulation;

/**
 * The behaviour every {@link VmmDriver} must show, as a list of named checks that run against any
 * driver through the interface alone (plus {@link DeviceBytes} to prove memory holds data). The host
 * emulation runs them in the unit tests; {@code vmmkit driver-check} runs them on the real driver.
 *
 * <p>Each check gives back every handle, mapping and reservation it took, pass or fail.
 */
public final class DriverConformance {

    /** A named check. */
    public record Check(String name, Body body) {
    }

    /** What a check does; it fails by throwing, and skips by throwing {@link CheckSkipped}. */
    @FunctionalInterface
    public interface Body {
        void run(ConformanceTarget target);
    }

    /** Codes accepted for a released handle: the documented INVALID_VALUE, or INVALID_HANDLE. */
    private static final Set<Integer> RELEASED_HANDLE_CODES = Set.of(CudaResult.INVALID_VALUE, CudaResult.INVALID_HANDLE);
    /** Codes accepted for a size too large for any address space: invalid, or no room for it. */
    private static final Set<Integer> HUGE_SIZE_CODES = Set.of(CudaResult.INVALID_VALUE, CudaResult.OUT_OF_MEMORY);
    /** At most this many creates to reach out of memory. */
    private static final int OOM_PROBE_MAX_CREATES = 64;

    private static final List<Check> CHECKS = List.of(
            new Check("map_write_read", DriverConformance::mapWriteRead),
            new Check("one_handle_at_two_addresses", DriverConformance::oneHandleAtTwoAddresses),
            new Check("release_while_mapped_keeps_data", DriverConformance::releaseWhileMappedKeepsData),
            new Check("unmap_several_whole_mappings_at_once", DriverConformance::unmapSeveralWholeMappings),
            new Check("error_map_over_mapped_range", DriverConformance::errorMapOverMappedRange),
            new Check("error_unmap_of_unmapped_or_partial_range", DriverConformance::errorUnmapOfUnmappedRange),
            new Check("error_set_access_on_unmapped_range", DriverConformance::errorSetAccessOnUnmappedRange),
            new Check("error_misaligned_size_or_address", DriverConformance::errorMisaligned),
            new Check("error_size_zero", DriverConformance::errorSizeZero),
            new Check("error_size_overflow", DriverConformance::errorSizeOverflow),
            new Check("error_address_outside_reservations", DriverConformance::errorAddressOutsideReservations),
            new Check("error_released_handle", DriverConformance::errorReleasedHandle),
            new Check("memory_info_is_consistent", DriverConformance::memoryInfoIsConsistent),
            new Check("out_of_memory_is_recognisable", DriverConformance::outOfMemoryIsRecognisable),
            new Check("set_access_failure_rolls_back_map", DriverConformance::setAccessFailureRollsBackMap),
            new Check("counting_driver_counts_each_kind", DriverConformance::countingDriverCountsEachKind),
            new Check("events_on_default_stream", DriverConformance::eventsOnDefaultStream),
            new Check("device_synchronize", DriverConformance::deviceSynchronize),
            new Check("host_transfers_round_trip", TransferChecks::roundTripThroughPinnedMemory),
            new Check("host_transfers_refuse_bad_ranges", TransferChecks::refusesBadRanges),
            new Check("set_access_for_a_device_set", DriverConformance::setAccessForADeviceSet),
            new Check("exported_handle_imports_the_same_memory", DriverConformance::exportedHandleImportsTheSameMemory),
            // Last: on a real device, closing a second driver must not disturb the checks before it.
            new Check("closed_driver_reports_deinitialized", DriverConformance::closedDriverReportsDeinitialized));

    private DriverConformance() {
    }

    /** Every check, in the order they run. */
    public static List<Check> checks() {
        return CHECKS;
    }

    /** Runs one check; never throws. */
    public static CheckResult run(Check check, ConformanceTarget target) {
        try {
            check.body().run(target);
            return new CheckResult(check.name(), CheckResult.Status.PASS, "", null);
        } catch (CheckSkipped skipped) {
            return new CheckResult(check.name(), CheckResult.Status.SKIP, skipped.getMessage(), null);
        } catch (Throwable failure) {
            return new CheckResult(check.name(), CheckResult.Status.FAIL, oneLine(failure), failure);
        }
    }

    /** Runs every check in order. */
    public static List<CheckResult> runAll(ConformanceTarget target) {
        List<CheckResult> results = new ArrayList<>();
        for (Check check : CHECKS) {
            results.add(run(check, target));
        }
        return results;
    }

    // ---- memory holds data ----

    /** Several handles of different sizes side by side in one range; every byte holds what was written. */
    private static void mapWriteRead(ConformanceTarget target) {
        VmmDriver driver = target.driver();
        DeviceBytes bytes = target.bytes();
        long g = driver.granularity();
        try (Scratch scratch = new Scratch(driver)) {
            long va = scratch.reserve(8 * g);
            long[] sizes = {g, 2 * g, g, 4 * g};
            long offset = 0;
            for (long size : sizes) {
                scratch.map(va + offset, size, scratch.create(size));
                offset += size;
            }
            driver.setAccess(va, 8 * g); // one call over four whole mappings
            offset = 0;
            for (int i = 0; i < sizes.length; i++) {
                bytes.fill(va + offset, sizes[i], 100 + i);
                offset += sizes[i];
            }
            offset = 0;
            for (int i = 0; i < sizes.length; i++) {
                expectPattern(bytes, va + offset, sizes[i], 100 + i, "handle " + i);
                offset += sizes[i];
            }
            for (long granule = 0; granule < 8; granule++) {
                long first = va + granule * g;
                long last = first + g - Long.BYTES;
                bytes.writeLong(first, 0x1111_0000L + granule);
                bytes.writeLong(last, 0x2222_0000L + granule);
                expectWord(0x1111_0000L + granule, bytes.readLong(first), "first word of granule " + granule);
                expectWord(0x2222_0000L + granule, bytes.readLong(last), "last word of granule " + granule);
            }
            bytes.fill(va, 8 * g, 7);
            expectPattern(bytes, va, 8 * g, 7, "whole range across handles");
        }
    }

    /** One handle mapped at two addresses: a write through one is read through the other. */
    private static void oneHandleAtTwoAddresses(ConformanceTarget target) {
        VmmDriver driver = target.driver();
        DeviceBytes bytes = target.bytes();
        long g = driver.granularity();
        try (Scratch scratch = new Scratch(driver)) {
            long va = scratch.reserve(2 * g);
            long handle = scratch.create(g);
            scratch.mapWithAccess(va, g, handle);
            scratch.mapWithAccess(va + g, g, handle);
            bytes.fill(va, g, 21);
            expectPattern(bytes, va + g, g, 21, "second address after a fill through the first");
            bytes.writeLong(va + g + 64, 0xCAFE_F00DL);
            expectWord(0xCAFE_F00DL, bytes.readLong(va + 64), "word written through the second address");
        }
    }

    /** setAccess naming the own device as a set works as plain setAccess; a set with both sides overlapping is refused. */
    private static void setAccessForADeviceSet(ConformanceTarget target) {
        VmmDriver driver = target.driver();
        DeviceBytes bytes = target.bytes();
        long g = driver.granularity();
        try (Scratch scratch = new Scratch(driver)) {
            long va = scratch.reserve(2 * g);
            scratch.map(va, g, scratch.create(g));
            scratch.map(va + g, g, scratch.create(g));
            long own = DeviceSet.of(driver.device());
            expectError("grant and revoke the same device", () -> driver.setAccess(va, 2 * g, own, own), Expectations.INVALID_CODES);
            driver.setAccess(va, 2 * g, own, DeviceSet.NONE); // one call over two mappings
            bytes.fill(va, 2 * g, 51);
            expectPattern(bytes, va, 2 * g, 51, "range given access as a device set");
        }
    }

    /** A handle exported as a POSIX descriptor and imported again maps the same bytes (skipped where not exportable). */
    private static void exportedHandleImportsTheSameMemory(ConformanceTarget target) {
        VmmDriver driver = target.driver();
        DeviceBytes bytes = target.bytes();
        if (!driver.canExport()) throw new CheckSkipped("the driver's handles are not exportable");
        long g = driver.granularity();
        try (Scratch scratch = new Scratch(driver)) {
            long va = scratch.reserve(2 * g);
            long handle = scratch.create(g);
            scratch.mapWithAccess(va, g, handle);
            bytes.fill(va, g, 61);
            int fd = driver.exportHandle(handle);
            long imported;
            try {
                imported = scratch.importHandle(fd, g);
            } finally {
                Descriptors.close(fd);
            }
            scratch.mapWithAccess(va + g, g, imported);
            expectPattern(bytes, va + g, g, 61, "imported handle mapped at a second address");
            bytes.writeLong(va + g + 8, 0x1234_5678L);
            expectWord(0x1234_5678L, bytes.readLong(va + 8), "word written through the imported mapping");
        }
    }

    /** Release while mapped: the data stays valid until unmap; the handle is unusable at once. */
    private static void releaseWhileMappedKeepsData(ConformanceTarget target) {
        VmmDriver driver = target.driver();
        DeviceBytes bytes = target.bytes();
        long g = driver.granularity();
        try (Scratch scratch = new Scratch(driver)) {
            long va = scratch.reserve(2 * g);
            long handle = scratch.create(g);
            scratch.mapWithAccess(va, g, handle);
            bytes.fill(va, g, 31);
            scratch.release(handle);
            expectPattern(bytes, va, g, 31, "mapping of a released handle");
            scratch.unmap(va, g);
            // Any use of the handle now is a use after free: CUDA 580 crashes in libcuda (SIGSEGV)
            // rather than returning an error, so only the emulation checks it (error_released_handle).
            long again = scratch.create(g);
            scratch.mapWithAccess(va, g, again);
            bytes.fill(va, g, 32);
            expectPattern(bytes, va, g, 32, "new handle at the same address");
        }
    }

    /** One unmap may cover several whole mappings; the range is then plain reserved space again. */
    private static void unmapSeveralWholeMappings(ConformanceTarget target) {
        VmmDriver driver = target.driver();
        DeviceBytes bytes = target.bytes();
        long g = driver.granularity();
        try (Scratch scratch = new Scratch(driver)) {
            long va = scratch.reserve(4 * g);
            for (int i = 0; i < 4; i++) {
                scratch.map(va + i * g, g, scratch.create(g));
            }
            driver.setAccess(va, 4 * g);
            bytes.fill(va, 4 * g, 41);
            expectPattern(bytes, va, 4 * g, 41, "four handles");
            scratch.unmap(va, 4 * g);
            scratch.mapWithAccess(va, 4 * g, scratch.create(4 * g));
            bytes.fill(va, 4 * g, 42);
            expectPattern(bytes, va, 4 * g, 42, "one handle mapped over the unmapped range");
        }
    }

    // ---- errors: the right code, a message naming the call, and no change of state ----

    private static void errorMapOverMappedRange(ConformanceTarget target) {
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

    private static void errorUnmapOfUnmappedRange(ConformanceTarget target) {
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

    private static void errorSetAccessOnUnmappedRange(ConformanceTarget target) {
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

    private static void errorMisaligned(ConformanceTarget target) {
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

    private static void errorSizeZero(ConformanceTarget target) {
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
    private static void errorSizeOverflow(ConformanceTarget target) {
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

    private static void errorAddressOutsideReservations(ConformanceTarget target) {
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

    private static void errorReleasedHandle(ConformanceTarget target) {
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

    // ---- memory accounting ----

    private static void memoryInfoIsConsistent(ConformanceTarget target) {
        VmmDriver.MemoryInfo info = target.driver().memoryInfo();
        expect(info.totalBytes() > 0, "total memory " + info.totalBytes() + " is not positive");
        expect(info.freeBytes() >= 0 && info.freeBytes() <= info.totalBytes(),
                "free memory " + info.freeBytes() + " is outside [0, total " + info.totalBytes() + "]");
    }

    /**
     * Creating until the device is full ends in an error that {@link DriverException#isOutOfMemory()}
     * recognises; after releasing, creating works again.
     */
    private static void outOfMemoryIsRecognisable(ConformanceTarget target) {
        VmmDriver driver = target.driver();
        long g = driver.granularity();
        long free = driver.memoryInfo().freeBytes();
        if (free > target.oomProbeLimitBytes()) {
            throw new CheckSkipped("device has " + (free >> 20) + " MiB free, more than the out-of-memory probe limit of "
                    + (target.oomProbeLimitBytes() >> 20) + " MiB");
        }
        long chunk = Math.max(g, free / 4 / g * g); // a few large handles reach the limit fastest
        DriverException outOfMemory = null;
        try (Scratch scratch = new Scratch(driver)) {
            for (int i = 0; i < OOM_PROBE_MAX_CREATES && outOfMemory == null; i++) {
                try {
                    scratch.create(chunk);
                } catch (DriverException e) {
                    if (!e.isOutOfMemory()) {
                        throw e;
                    }
                    outOfMemory = e;
                }
            }
        }
        expect(outOfMemory != null, "no out-of-memory error after " + OOM_PROBE_MAX_CREATES + " creates of "
                + CallText.hex(chunk) + " bytes");
        expectMentions(outOfMemory, "cuMemCreate", CallText.hex(chunk));
        try (Scratch scratch = new Scratch(driver)) {
            scratch.create(g); // everything was released: room again
        }
    }

    // ---- adaptors ----

    /** mapWithAccess undoes the map when setAccess fails, so mapping again at the same address works. */
    private static void setAccessFailureRollsBackMap(ConformanceTarget target) {
        VmmDriver driver = target.driver();
        long g = driver.granularity();
        CountingDriver counting = new CountingDriver(driver);
        FaultPlan plan = new FaultPlan().failAlways(DriverCall.SET_ACCESS, CudaResult.OUT_OF_MEMORY);
        FaultInjectingDriver faulty = new FaultInjectingDriver(counting, plan);
        try (Scratch scratch = new Scratch(driver)) {
            long va = scratch.reserve(g);
            long handle = scratch.create(g);
            DriverCallCounts before = counting.counts();
            DriverException failure = expectError("mapWithAccess with setAccess failing",
                    () -> faulty.mapWithAccess(va, g, handle), Set.of(CudaResult.OUT_OF_MEMORY),
                    "cuMemSetAccess", CallText.hex(va));
            if (failure.getSuppressed().length > 0) {
                throw new AssertionError("the rollback unmap failed: " + oneLine(failure.getSuppressed()[0]), failure);
            }
            DriverCallCounts made = counting.counts().minus(before);
            expectCount(1, made.get(DriverCall.MAP), "maps reaching the driver");
            expectCount(0, made.get(DriverCall.SET_ACCESS), "setAccess calls reaching the driver (the fault replaces it)");
            expectCount(1, made.get(DriverCall.UNMAP), "rollback unmaps reaching the driver");
            plan.clear();
            faulty.mapWithAccess(va, g, handle);
            scratch.mapped(va, g);
            target.bytes().fill(va, g, 131);
            expectPattern(target.bytes(), va, g, 131, "the range mapped again after the rollback");
        }
    }

    /** A CountingDriver counts each kind of call exactly, failed calls and events included. */
    private static void countingDriverCountsEachKind(ConformanceTarget target) {
        long g = target.driver().granularity();
        CountingDriver counting = new CountingDriver(target.driver());
        Map<DriverCall, Long> expected = new EnumMap<>(DriverCall.class);
        try (Scratch scratch = new Scratch(counting)) {
            long va = scratch.reserve(2 * g);
            long first = scratch.create(g);
            long second = scratch.create(g);
            scratch.map(va, g, first);
            scratch.map(va + g, g, second);
            counting.setAccess(va, 2 * g);
            counting.memoryInfo();
            expectInvalid("map over a mapped range", () -> counting.map(va, g, second), "cuMemMap");
            scratch.unmap(va, 2 * g);
            scratch.release(first);
            scratch.release(second);
            scratch.addressFree(va);
            StreamEvents events = counting.events();
            long event = events.create();
            try {
                events.record(event, 0);
                events.synchronize(event);
                events.isComplete(event);
            } finally {
                events.destroy(event);
            }
            events.synchronizeDevice();
        }
        expected.put(DriverCall.RESERVE, 1L);
        expected.put(DriverCall.CREATE, 2L);
        expected.put(DriverCall.MAP, 3L);
        expected.put(DriverCall.SET_ACCESS, 1L);
        expected.put(DriverCall.MEMORY_INFO, 1L);
        expected.put(DriverCall.UNMAP, 1L);
        expected.put(DriverCall.RELEASE, 2L);
        expected.put(DriverCall.ADDRESS_FREE, 1L);
        expected.put(DriverCall.EVENT_CREATE, 1L);
        expected.put(DriverCall.EVENT_RECORD, 1L);
        expected.put(DriverCall.EVENT_SYNCHRONIZE, 1L);
        expected.put(DriverCall.EVENT_QUERY, 1L);
        expected.put(DriverCall.EVENT_DESTROY, 1L);
        expected.put(DriverCall.DEVICE_SYNCHRONIZE, 1L);
        DriverCallCounts counts = counting.counts();
        expectEqual(new DriverCallCounts(expected), counts, "call counts");
        expectCount(expected.values().stream().mapToLong(Long::longValue).sum(), counts.total(), "total calls");
    }

    // ---- events ----

    private static void eventsOnDefaultStream(ConformanceTarget target) {
        StreamEvents events = target.driver().events();
        long event = events.create();
        try {
            expect(events.isComplete(event), "an event never recorded is not complete");
            events.record(event, 0);
            events.synchronize(event);
            expect(events.isComplete(event), "an event is not complete after synchronize");
            events.record(event, 0);
            events.synchronize(event);
            expect(events.isComplete(event), "a re-recorded event is not complete after synchronize");
        } finally {
            events.destroy(event);
        }
    }

    /** Work recorded on the default stream, then a wait for the whole device: it returns, and the event is complete. */
    private static void deviceSynchronize(ConformanceTarget target) {
        StreamEvents events = target.driver().events();
        long event = events.create();
        try {
            events.record(event, 0);
            events.synchronize(event);
            events.record(event, 0);
            events.synchronizeDevice();
            expect(events.isComplete(event), "an event recorded before synchronizeDevice is not complete after it");
            events.synchronizeDevice(); // nothing left to wait for: returns at once
        } finally {
            events.destroy(event);
        }
    }

    // ---- lifecycle ----

    private static void closedDriverReportsDeinitialized(ConformanceTarget target) {
        if (target.freshDriver() == null) {
            throw new CheckSkipped("no way to open a second driver");
        }
        VmmDriver fresh = target.freshDriver().get();
        long g = fresh.granularity();
        fresh.close();
        Set<Integer> deinitialized = Set.of(CudaResult.DEINITIALIZED);
        expectError("reserve after close", () -> fresh.reserve(g, 0), deinitialized, "cuMemAddressReserve");
        expectError("create after close", () -> fresh.create(g), deinitialized, "cuMemCreate");
        expectError("memoryInfo after close", fresh::memoryInfo, deinitialized, "cuMemGetInfo");
        expectError("event create after close", () -> fresh.events().create(), deinitialized, "cuEventCreate");
        fresh.close(); // closing twice is harmless
    }

    private static String oneLine(Throwable failure) {
        String message = failure instanceof AssertionError || failure instanceof DriverException
                ? failure.getMessage() : failure.toString();
        return message == null ? failure.getClass().getSimpleName() : message.replace('\n', ' ');
    }
}
