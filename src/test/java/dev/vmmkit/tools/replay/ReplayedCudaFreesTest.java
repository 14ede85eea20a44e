package dev.vmmkit.tools.replay;

import dev.vmmkit.core.AllocatorStats;
import dev.vmmkit.core.DeviceMemoryResource;
import dev.vmmkit.core.ReplayedCovers;
import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.BeforeDeviceSyncDriver;
import dev.vmmkit.driver.VmmDriver;
import dev.vmmkit.driver.host.HostDriver;
import dev.vmmkit.trace.AllocationTrace;
import dev.vmmkit.trace.TestTraces;
import dev.vmmkit.trace.TraceReader;
import org.agrona.collections.Long2LongHashMap;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A recorded training loop (a U-Net's) rewritten as a program that frees with cudaFree, each
 * free's memory coming back a number of requests later (as on a device that runs behind the
 * program), replayed through {@link VmmManager#forReplay}. A reference model beside the allocator
 * checks that no allocation gets memory of a cudaFree before the trace's completion of it, or a
 * device synchronisation the allocator waited for; and a replay repeats exactly.
 */
class ReplayedCudaFreesTest {
    private static final String DEVICE_WIDE = Long.toUnsignedString(DeviceMemoryResource.DEVICE_WIDE_STREAM);

    @Test
    void noCudaFreesMemoryIsHandedOutBeforeItsCompletionAndAReplayRepeats() throws IOException {
        AllocationTrace lagged = asCudaFrees(TraceReader.read(TestTraces.shipped("unet_train.csv.gz")), 64);
        Outcome first = replay(lagged);
        Outcome second = replay(lagged);

        assertTrue(first.reusedAfterCompletion > 0, "some allocation got memory a completion had given back");
        assertEquals(first.peakReservedBytes, second.peakReservedBytes, "the same trace, the same peak");
        assertEquals(first.synchronisations, second.synchronisations, "the same trace, the same waits");
    }

    @Test
    void completionsRightAfterTheFreesHoldWhatStreamFreesHold() throws IOException {
        AllocationTrace recorded = TraceReader.read(TestTraces.shipped("unet_train.csv.gz"));
        Outcome onStream = replay(recorded);
        Outcome asCudaFrees = replay(asCudaFrees(recorded, 0));
        assertTrue(asCudaFrees.peakReservedBytes <= onStream.peakReservedBytes + onStream.peakReservedBytes / 100,
                "cudaFrees completed at once peaked at " + asCudaFrees.peakReservedBytes + " bytes, stream frees at "
                        + onStream.peakReservedBytes);
    }

    /**
     * Every request marked as one that gave up waiting in the program: the replay's waits give up
     * at once, so nothing synchronises, and still no cudaFree's memory is handed out before its
     * completion.
     */
    @Test
    void requestsThatGaveUpWaitingSynchroniseNothingAndReuseNothingEarly() throws IOException {
        AllocationTrace recorded = TraceReader.read(TestTraces.shipped("unet_train.csv.gz"));
        Outcome waiting = replay(asCudaFrees(recorded, 64, false));
        Outcome givingUp = replay(asCudaFrees(recorded, 64, true));

        assertTrue(waiting.synchronisations > 0, "precondition: unmarked, some requests wait for the device");
        assertEquals(0, givingUp.synchronisations, "a request that gave up never synchronises");
        assertTrue(givingUp.reusedAfterCompletion > 0, "completions still give memory back");
    }

    private static AllocationTrace asCudaFrees(AllocationTrace trace, int lag) throws IOException {
        return asCudaFrees(trace, lag, false);
    }

    /**
     * {@code trace} with every free a cudaFree whose completion comes {@code lag} operations later,
     * and with {@code gaveUp}, every alloc marked as a request that gave up waiting.
     */
    private static AllocationTrace asCudaFrees(AllocationTrace trace, int lag, boolean gaveUp) throws IOException {
        StringBuilder text = new StringBuilder();
        ArrayDeque<long[]> waiting = new ArrayDeque<>(); // {op at which it completes, key, size}
        for (int op = 0; op < trace.ops(); op++) {
            while (!waiting.isEmpty() && waiting.peekFirst()[0] <= op) {
                long[] w = waiting.removeFirst();
                text.append("free_completed,").append(w[1]).append(',').append(w[2]).append(',').append(DEVICE_WIDE).append('\n');
            }
            if (trace.kind(op) == AllocationTrace.ALLOC) {
                text.append("alloc,").append(trace.key(op)).append(',').append(trace.size(op)).append(",0\n");
                if (gaveUp) text.append("wait_gave_up,").append(trace.key(op)).append(',').append(trace.size(op)).append(",0\n");
            } else {
                text.append("free_requested,").append(trace.key(op)).append(',').append(trace.size(op)).append(',')
                        .append(DEVICE_WIDE).append('\n');
                waiting.addLast(new long[] {op + 1 + lag, trace.key(op), trace.size(op)});
            }
        }
        return TraceReader.read(new ByteArrayInputStream(text.toString().getBytes(StandardCharsets.UTF_8)), "lagged.csv");
    }

    private record Outcome(long peakReservedBytes, int synchronisations, int reusedAfterCompletion) {
    }

    private static Outcome replay(AllocationTrace trace) {
        try (HostDriver host = HostDriver.open()) {
            AtomicInteger synchronisations = new AtomicInteger();
            VmmDriver driver = new BeforeDeviceSyncDriver(host, synchronisations::incrementAndGet);
            VmmManager manager = VmmManager.forReplay(driver, VmmConfig.from(Map.of()));
            ReferenceModel model = new ReferenceModel(trace, manager, synchronisations);
            try (ReplayTarget target = model.target()) {
                new Replayer(trace).replay(target, null, model);
                return new Outcome(manager.stats().peakReservedBytes(), synchronisations.get(), model.reusedAfterCompletion);
            }
        }
    }

    /**
     * What memory may be handed out: a cudaFree's range waits until the trace completes it or the
     * allocator synchronises the device (which covers every free made before it).
     */
    private static final class ReferenceModel implements DeviceMemoryResource, ReplayListener {
        private final VmmManager manager;
        /** The device synchronisations the allocator made so far. */
        private final AtomicInteger synchronisations;
        private final Long2LongHashMap sizeAt = new Long2LongHashMap(-1);
        private final TreeMap<Long, Long> waitingEnd = new TreeMap<>();
        /** Start of each cudaFree's range not yet covered, by ordinal from {@link #firstOrdinalWaiting}. */
        private final ArrayDeque<Long> byOrdinal = new ArrayDeque<>();
        private int firstOrdinalWaiting;
        private int synchronisationsSeen;
        private final TreeMap<Long, Long> completedEnd = new TreeMap<>();
        int reusedAfterCompletion;
        private final AllocationTrace trace;

        ReferenceModel(AllocationTrace trace, VmmManager manager, AtomicInteger synchronisations) {
            this.trace = trace;
            this.manager = manager;
            this.synchronisations = synchronisations;
        }

        ReplayTarget target() {
            ReplayTarget inner = ReplayTarget.of(manager);
            ReferenceModel model = this;
            return new ReplayTarget() {
                @Override
                public DeviceMemoryResource resource() {
                    return model;
                }

                @Override
                public AllocatorStats stats() {
                    return inner.stats();
                }

                @Override
                public ReplayedCovers replayedCovers() {
                    return inner.replayedCovers();
                }

                @Override
                public void close() {
                    inner.close();
                }
            };
        }

        @Override
        public long allocate(long size, long stream) {
            long address = manager.allocate(size, stream);
            if (synchronisations.get() != synchronisationsSeen) { // it waited: every free so far is covered
                synchronisationsSeen = synchronisations.get();
                while (!byOrdinal.isEmpty()) coverOldest();
            }
            Long before = waitingEnd.floorKey(address + size - 1);
            assertTrue(before == null || waitingEnd.get(before) <= address, String.format(
                    "0x%x (%d bytes) was handed out inside 0x%x, a cudaFree's memory not yet completed", address, size, before));
            Long reused = completedEnd.floorKey(address + size - 1);
            if (reused != null && completedEnd.get(reused) > address) reusedAfterCompletion++;
            sizeAt.put(address, size);
            return address;
        }

        @Override
        public void deallocate(long address, long stream) {
            manager.deallocate(address, stream);
            long size = sizeAt.remove(address);
            if (stream != DEVICE_WIDE_STREAM) return;
            waitingEnd.put(address, address + size);
            byOrdinal.addLast(address);
        }

        @Override
        public int first() {
            return 0;
        }

        @Override
        public int afterOp(int op, ReplayTarget target) {
            if (trace.kind(op) == AllocationTrace.COVER) {
                while (firstOrdinalWaiting <= trace.coveredFree(op)) coverOldest(); // and every earlier one
            }
            return op + 1;
        }

        private void coverOldest() {
            long address = byOrdinal.removeFirst();
            Long end = waitingEnd.remove(address);
            if (end != null) completedEnd.put(address, end);
            firstOrdinalWaiting++;
        }
    }
}
