package dev.vmmkit.core;

import dev.vmmkit.core.MemoryTagPauseTest.Block;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;

import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.assertFullyIntact;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static dev.vmmkit.core.AllocatorTestSupport.smallConfig;
import static dev.vmmkit.core.MemoryTagPauseTest.WEIGHTS;
import static dev.vmmkit.core.MemoryTagPauseTest.allocateFilled;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A memory tag's pause and resume beside a CUDA stream capture: a pause synchronises the device,
 * which would invalidate the capture, so both are refused while one is under way, with nothing
 * done; and a capture that begins during a pause waits until the pause has returned, while no
 * other pause starts.
 */
class MemoryTagCaptureTest {

    @Test
    void pauseAndResumeAreRefusedWhileACaptureIsUnderwayAndLeaveTheTagAsItWas() {
        HostDriver host = hostDriver(8 * MIB);
        DeviceSyncGate gate = new DeviceSyncGate();
        gate.open(); // counts the device synchronisations, holds none
        try (VmmManager m = new VmmManager(new DeviceSyncGatedDriver(host, gate), smallConfig(16 * MIB))) {
            m.beginTagRegion("weights", true);
            List<Block> weights = allocateFilled(m, host, WEIGHTS, 300);
            m.endTagRegion();
            long held = host.usage().aliveBytes();
            int syncsBefore = gate.arrived();

            beginCapture(m);
            CaptureUnderwayException refused = assertThrows(CaptureUnderwayException.class, () -> m.pause("weights"));
            assertTrue(refused.getMessage().contains("memory tag 'weights'") && refused.getMessage().contains("stream capture"),
                    refused.getMessage());
            assertThrows(CaptureUnderwayException.class, () -> m.pause(null), "every tag, too");
            assertEquals(syncsBefore, gate.arrived(), "a refused pause synchronises nothing (the capture stays valid)");
            assertEquals(held, host.usage().aliveBytes(), "a refused pause gives nothing back");
            TagStats.Tag running = m.stats().tags().tags().get(0);
            assertFalse(running.paused());
            assertEquals(0, running.pauses());
            m.beginTagRegion("weights", true);
            long during = m.allocate(MIB, 0); // the tag still allocates
            m.endTagRegion();
            m.deallocate(during, 0);
            m.streamCaptures().ended();

            m.pause("weights");
            assertTrue(host.usage().aliveBytes() < held, "once the capture ended, the pause gives the tag's memory back");
            beginCapture(m);
            assertThrows(CaptureUnderwayException.class, () -> m.resume("weights"));
            assertTrue(m.stats().tags().tags().get(0).paused(), "a refused resume leaves the tag paused");
            m.beginTagRegion("weights", true);
            assertThrows(TagPausedException.class, () -> m.allocate(MIB, 0));
            m.endTagRegion();
            m.streamCaptures().ended();

            m.resume("weights");
            for (Block b : weights) assertFullyIntact(host, b.address(), b.size(), b.seed(), "weights after the resume");
            TagStats.Tag after = m.stats().tags().tags().get(0);
            assertEquals(1, after.pauses());
            assertEquals(1, after.resumes());
            m.freeKeptHostMemory();
        } finally {
            host.close();
        }
    }

    /** A capture begins: it must not wait, since no pause or resume runs (a leaked count would hold it). */
    private static void beginCapture(VmmManager m) {
        assertTimeoutPreemptively(Duration.ofSeconds(30), () -> m.streamCaptures().beginning());
    }

    @Test
    void aCaptureThatBeginsDuringAPauseWaitsUntilThePauseHasReturned() throws Exception {
        HostDriver host = hostDriver(8 * MIB);
        DeviceSyncGate gate = new DeviceSyncGate();
        Set<Thread> fencesBefore = DeviceSyncGate.fenceThreadsSince(Set.of());
        VmmManager m = new VmmManager(new DeviceSyncGatedDriver(host, gate), smallConfig(16 * MIB));
        try {
            m.beginTagRegion("kv_cache", false);
            m.allocate(2 * MIB, 0);
            m.endTagRegion();
            m.beginTagRegion("other", false);
            m.allocate(2 * MIB, 0);
            m.endTagRegion();
            StreamCaptures captures = m.streamCaptures();
            assertTimeoutPreemptively(Duration.ofSeconds(30), () -> {
                CompletableFuture<Void> pause = CompletableFuture.runAsync(() -> m.pause("kv_cache"));
                gate.awaitArrivals(1); // the pause waits for the device's work, held at the gate
                Thread capturing = new Thread(captures::beginning, "capturing");
                capturing.start();
                while (captures.waitingToBegin() == 0) Thread.onSpinWait(); // the capture waits to be counted
                assertFalse(captures.underway(), "no capture is under way while the pause runs");
                // Nothing else starts before the waiting capture, so calls that keep overlapping cannot starve it.
                assertThrows(CaptureUnderwayException.class, () -> m.pause("other"));
                gate.open();
                pause.join();
                capturing.join();
                assertTrue(captures.underway(), "the capture began once the pause had returned");
                assertTrue(m.stats().tags().tags().get(0).paused());
                captures.ended();
                m.pause("other");
            });
        } finally {
            gate.openAndCloseCleanly(m, host, fencesBefore);
        }
    }
}
