package dev.vmmkit.driver.conformance;

import dev.vmmkit.driver.DeviceBytes;
import dev.vmmkit.driver.HostTransfers;
import dev.vmmkit.driver.StreamEvents;
import dev.vmmkit.driver.VmmDriver;

import static dev.vmmkit.driver.conformance.Expectations.expectInvalid;
import static dev.vmmkit.driver.conformance.Expectations.expectPattern;
import static dev.vmmkit.driver.conformance.Expectations.requireStrictEmulation;

/**
 * The checks of {@link HostTransfers}: pinned host memory and the stream-ordered copies between it
 * and mapped device memory, as a paused tag's kept contents use them.
 */
final class TransferChecks {
    private TransferChecks() {
    }

    /**
     * Two granules' bytes go to pinned memory and back (the device range overwritten meanwhile),
     * copied in two pieces on a stream of its own, waited for with an event: every byte returns.
     */
    static void roundTripThroughPinnedMemory(ConformanceTarget target) {
        VmmDriver driver = target.driver();
        DeviceBytes bytes = target.bytes();
        HostTransfers transfers = driver.transfers();
        StreamEvents events = driver.events();
        long g = driver.granularity();
        try (Scratch scratch = new Scratch(driver)) {
            long va = scratch.reserve(2 * g);
            scratch.map(va, 2 * g, scratch.create(2 * g));
            driver.setAccess(va, 2 * g);
            bytes.fill(va, 2 * g, 41);
            long pinned = transfers.allocatePinned(2 * g);
            long stream = transfers.createStream();
            long event = events.create();
            try {
                transfers.copyToHost(pinned, va, g, stream);
                transfers.copyToHost(pinned + g, va + g, g, stream);
                events.record(event, stream);
                events.synchronize(event);
                bytes.fill(va, 2 * g, 42);
                transfers.copyToDevice(va, pinned, 2 * g, stream);
                events.record(event, stream);
                events.synchronize(event);
                expectPattern(bytes, va, 2 * g, 41, "device bytes after a round trip through pinned memory");
            } finally {
                events.destroy(event);
                transfers.destroyStream(stream);
                transfers.freePinned(pinned);
            }
        }
    }

    /** The emulation refuses copies a real device would refuse or fault on: unmapped device memory, host memory not pinned. */
    static void refusesBadRanges(ConformanceTarget target) {
        requireStrictEmulation(target, "a copy of an unmapped range may fault a real device's context");
        VmmDriver driver = target.driver();
        HostTransfers transfers = driver.transfers();
        long g = driver.granularity();
        try (Scratch scratch = new Scratch(driver)) {
            long va = scratch.reserve(2 * g);
            scratch.map(va, g, scratch.create(g));
            driver.setAccess(va, g);
            long pinned = transfers.allocatePinned(g);
            long stream = transfers.createStream();
            try {
                expectInvalid("a copy of a partly unmapped device range", () -> transfers.copyToHost(pinned, va, 2 * g, stream));
                expectInvalid("a copy past the end of pinned memory", () -> transfers.copyToDevice(va, pinned + 8, g, stream));
            } finally {
                transfers.destroyStream(stream);
                transfers.freePinned(pinned);
            }
            expectInvalid("a second free of pinned memory", () -> transfers.freePinned(pinned));
        }
    }
}
