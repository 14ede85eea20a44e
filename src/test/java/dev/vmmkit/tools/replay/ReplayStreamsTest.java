package dev.vmmkit.tools.replay;

import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.FaultInjectingDriver;
import dev.vmmkit.driver.FaultPlan;
import dev.vmmkit.driver.ForwardingDriver;
import dev.vmmkit.driver.ForwardingEvents;
import dev.vmmkit.driver.ForwardingTransfers;
import dev.vmmkit.driver.HostTransfers;
import dev.vmmkit.driver.StreamEvents;
import dev.vmmkit.driver.VmmDriver;
import dev.vmmkit.driver.host.HostDriver;
import dev.vmmkit.trace.AllocationTrace;
import dev.vmmkit.trace.TestTraces;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A recorded stream is the traced program's handle: on a real driver it names nothing, and passing
 * it crashed a CUDA replay inside the driver. A replay must give the driver only streams of its own.
 */
class ReplayStreamsTest {
    private static final long RECORDED_A = 171_172_496L;
    private static final long RECORDED_B = 0x7f00_dead_beefL;

    /**
     * Three streams: the default one and two handles of the traced program. Stream B's requests
     * come after A freed as much as they need, so the allocator orders B's reuse after A's frees
     * with events recorded on A.
     */
    private static String trace() {
        StringBuilder text = new StringBuilder("alloc,1,4096,0\n");
        for (int round = 0; round < 4; round++) {
            long stream = round % 2 == 0 ? RECORDED_A : RECORDED_B;
            for (int i = 0; i < 8; i++) text.append("alloc,").append(100 + round * 8 + i).append(",2097152,").append(stream).append('\n');
            for (int i = 0; i < 8; i++) {
                text.append("free_requested,").append(100 + round * 8 + i).append(",2097152,").append(stream).append('\n');
                text.append("free_completed,").append(100 + round * 8 + i).append(",2097152,").append(stream).append('\n');
            }
        }
        return text.append("free_completed,1,4096,0\n").toString();
    }

    @Test
    void theDriverSeesOnlyTheDefaultStreamAndStreamsTheReplayMade() throws IOException {
        AllocationTrace trace = TestTraces.parse(trace());
        StreamWatchingDriver driver = new StreamWatchingDriver(HostDriver.open());
        try (VmmBackend backend = new VmmBackend(driver, VmmConfig.from(Map.of()))) {
            try (ReplayTarget target = backend.newTarget()) {
                ReplayReport report = new Replayer(trace).replay(target);
                assertEquals(33, report.allocs());
            }
            assertFalse(driver.recordedOn.isEmpty(), "the stream frees were ordered with events");
            for (long stream : driver.recordedOn) {
                assertTrue(stream == 0 || driver.made.contains(stream),
                        "event recorded on stream " + stream + ", which this process did not make");
            }
            assertEquals(2, driver.made.size(), "one stream for each recorded one but the default");
            assertEquals(driver.made, driver.destroyed, "the replay's streams are destroyed when its target closes");
        }
    }

    @Test
    void theSharedStreamsStayAndARecordedStreamKeepsItsStandIn() {
        StreamWatchingDriver driver = new StreamWatchingDriver(HostDriver.open());
        try (driver; ReplayStreams streams = new ReplayStreams(driver.transfers())) {
            long[] standIns = streams.standIns(new long[] {0, 1, 2, RECORDED_A, RECORDED_B});
            long[] again = streams.standIns(new long[] {RECORDED_B, RECORDED_A});

            assertEquals(0, standIns[0]);
            assertEquals(1, standIns[1], "CUDA's legacy default stream is every process's");
            assertEquals(2, standIns[2], "so is its per-thread default stream");
            assertTrue(driver.made.contains(standIns[3]) && driver.made.contains(standIns[4]));
            assertTrue(standIns[3] != standIns[4], "distinct recorded streams stay distinct");
            assertEquals(standIns[4], again[0]);
            assertEquals(standIns[3], again[1]);
        }
        assertEquals(driver.made, driver.destroyed);
    }

    @Test
    void aStreamTheDriverCannotMakeFailsTheReplayAndItsTargetClosesClean() throws IOException {
        AllocationTrace trace = TestTraces.parse(trace());
        FaultPlan plan = new FaultPlan().failNth(DriverCall.STREAM_CREATE, 2, CudaResult.OUT_OF_MEMORY);
        StreamWatchingDriver driver = new StreamWatchingDriver(new FaultInjectingDriver(HostDriver.open(), plan));
        try (VmmBackend backend = new VmmBackend(driver, VmmConfig.from(Map.of()))) {
            ReplayTarget target = backend.newTarget();
            DriverException failure = assertThrows(DriverException.class, () -> new Replayer(trace).replay(target));
            assertTrue(failure.getMessage().contains("cuStreamCreate"), failure.getMessage());
            target.close();
            assertEquals(1, driver.made.size(), "the first recorded stream got its stand-in, the second none");
            assertEquals(driver.made, driver.destroyed, "the stand-in made before the failure is destroyed at close");
            assertEquals(0, target.stats().liveBytes(), "nothing was allocated");
        }
    }

    @Test
    void aStreamThatCannotBeDestroyedLeavesNoOtherBehind() {
        FaultPlan plan = new FaultPlan().failNth(DriverCall.STREAM_DESTROY, 1, CudaResult.INVALID_VALUE);
        StreamWatchingDriver driver = new StreamWatchingDriver(new FaultInjectingDriver(HostDriver.open(), plan));
        try (driver) {
            ReplayStreams streams = new ReplayStreams(driver.transfers());
            streams.standIns(new long[] {RECORDED_A, RECORDED_B, 77});
            assertThrows(DriverException.class, streams::close);
            assertEquals(3, driver.destroyed.size(), "every stream was asked to go, the one that failed too");
        }
    }

    /** Notes the streams a driver is asked to make, destroy and record events on. */
    private static final class StreamWatchingDriver extends ForwardingDriver {
        final Set<Long> made = ConcurrentHashMap.newKeySet();
        final Set<Long> destroyed = ConcurrentHashMap.newKeySet();
        final Set<Long> recordedOn = ConcurrentHashMap.newKeySet();

        StreamWatchingDriver(VmmDriver delegate) {
            super(delegate);
        }

        @Override
        public StreamEvents events() {
            return new ForwardingEvents(delegate.events()) {
                @Override
                public void record(long event, long stream) {
                    recordedOn.add(stream);
                    super.record(event, stream);
                }
            };
        }

        @Override
        public HostTransfers transfers() {
            return new ForwardingTransfers(delegate.transfers()) {
                @Override
                public long createStream() {
                    long stream = super.createStream();
                    made.add(stream);
                    return stream;
                }

                @Override
                public void destroyStream(long stream) {
                    destroyed.add(stream);
                    super.destroyStream(stream);
                }
            };
        }
    }
}
