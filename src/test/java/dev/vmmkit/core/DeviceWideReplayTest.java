package dev.vmmkit.core;

import dev.vmmkit.driver.host.HostDriver;
import dev.vmmkit.trace.AllocationTrace;
import dev.vmmkit.trace.TestTraces;
import dev.vmmkit.trace.TraceReader;
import org.agrona.collections.Long2LongHashMap;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.time.Duration;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A recorded training loop (a U-Net's, whose backward passes free activations and ask for gradients
 * in turn) replayed twice on the host: freed on stream 0, as a replay frees, and freed as cudaFree
 * frees ({@link VmmManager#DEVICE_WIDE_STREAM}), each free covered by a device synchronisation before
 * the next request, as the fence's thread does while a program computes. Covered cudaFree blocks
 * are then the same free memory as a stream's, and physical memory peaks as in the replay (the
 * layouts may part where two free blocks of one size tie: a stream's tree is searched before the
 * tree of memory no work touches). Left for the next cache miss, a covered block was passed over
 * by every hit before it, and this loop held 1.12 times its peak of live bytes against the
 * replay's 1.03 (docs/cold-path.md, "cudaFree's frees in a live run").
 */
class DeviceWideReplayTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(120);

    @Test
    void cudaFreesCoveredBeforeTheNextRequestHoldWhatTheReplayHolds() throws IOException {
        AllocationTrace trace = TraceReader.read(TestTraces.shipped("unet_train.csv.gz"));
        assertTimeoutPreemptively(TIMEOUT, () -> {
            long onStream = peakReservedBytes(trace, false);
            long asCudaFree = peakReservedBytes(trace, true);
            double ratio = (double) asCudaFree / trace.peakLiveBytes();
            assertTrue(ratio <= 1.05, "cudaFree's replay held " + ratio + " times the peak of live bytes");
            assertTrue(asCudaFree <= onStream + onStream / 100,
                    "cudaFree's replay peaked at " + asCudaFree + " bytes, the stream's at " + onStream);
        });
    }

    private static long peakReservedBytes(AllocationTrace trace, boolean asCudaFree) {
        try (HostDriver host = HostDriver.open()) {
            VmmManager m = new VmmManager(host, VmmConfig.from(Map.of()));
            DeviceWideFence fence = m.deviceWideFence();
            Long2LongHashMap addresses = new Long2LongHashMap(-1);
            for (int i = 0; i < trace.ops(); i++) {
                if (trace.kind(i) == AllocationTrace.ALLOC) {
                    addresses.put(trace.key(i), m.allocate(trace.size(i), 0));
                    continue;
                }
                long address = addresses.remove(trace.key(i));
                if (address == -1) continue; // allocated before the trace began
                if (asCudaFree) {
                    m.deallocate(address, VmmManager.DEVICE_WIDE_STREAM);
                    fence.await(fence.request());
                } else {
                    m.deallocate(address, 0);
                }
            }
            long peak = m.stats().peakReservedBytes();
            m.close();
            return peak;
        }
    }
}
