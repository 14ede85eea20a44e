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

    /** At most this many creates to reach out of memory. */
    private static final int OOM_PROBE_MAX_CREATES = 64;

    private static final List<Check> CHECKS = List.of(
            new Check("map_write_read", DriverConformance::mapWriteRead),
            new Check("one_handle_at_two_addresses", DriverConformance::oneHandleAtTwoAddresses),
            new Check("release_while_mapped_keeps_data", DriverConformance::releaseWhileMappedKeepsData),
            new Check("unmap_several_whole_mappings_at_once", DriverConformance::unmapSeveralWholeMappings),
            new Check("error_map_over_mapped_range", ErrorChecks::errorMapOverMappedRange),
            new Check("error_unmap_of_unmapped_or_partial_range", ErrorChecks::errorUnmapOfUnmappedRange),
            new Check("error_set_access_on_unmapped_range", ErrorChecks::errorSetAccessOnUnmappedRange),
            new Check("error_misaligned_size_or_address", ErrorChecks::errorMisaligned),
            new Check("error_size_zero", ErrorChecks::errorSizeZero),
            new Check("error_size_overflow", ErrorChecks::errorSizeOverflow),
            new Check("error_address_outside_reservations", ErrorChecks::errorAddressOutsideReservations),
            new Check("error_released_handle", ErrorChecks::errorReleasedHandle),
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
            new Check("plain_handle_holds_memory_and_is_not_exported", DriverConformance::plainHandleIsNotExported),
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

    /**
     * A handle created not exportable maps and holds bytes like any other, and export refuses it
     * (skipped where no handle is exportable: then the refusal says nothing).
     */
    private static void plainHandleIsNotExported(ConformanceTarget target) {
        VmmDriver driver = target.driver();
        DeviceBytes bytes = target.bytes();
        long g = driver.granularity();
        try (Scratch scratch = new Scratch(driver)) {
            long va = scratch.reserve(g);
            long handle = scratch.create(g, false);
            scratch.mapWithAccess(va, g, handle);
            bytes.fill(va, g, 67);
            expectPattern(bytes, va, g, 67, "plain handle mapped");
            if (!driver.canExport()) throw new CheckSkipped("the driver's handles are not exportable");
            expectError("export of a handle created not exportable", () -> Descriptors.close(driver.exportHandle(handle)),
                    Set.of(CudaResult.INVALID_VALUE, CudaResult.NOT_SUPPORTED, CudaResult.NOT_PERMITTED));
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
