package dev.vmmkit.engine;

import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** A request that arrives while its instance is being paused waits for the pause, then resumes it; never runs beside it. */
class InstancePauseTest {
    private static final InstancePause.Paused PAUSED = new InstancePause.Paused(100, 90, 0, 5);

    /** Worker calls that record their order; the pause waits inside until the test lets it finish. */
    private static final class Calls implements InstancePause.Calls {
        final List<String> order = new CopyOnWriteArrayList<>();
        final CountDownLatch insidePause = new CountDownLatch(1);
        final CountDownLatch finishPause = new CountDownLatch(1);
        volatile boolean failPause;

        @Override
        public InstancePause.Paused pause() throws InstancePause.Failed {
            order.add("pause");
            insidePause.countDown();
            try {
                finishPause.await();
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
            if (failPause) throw new InstancePause.Failed("unmap failed", false);
            order.add("paused");
            return PAUSED;
        }

        @Override
        public long resume() {
            order.add("resume");
            return 7;
        }
    }

    @Test
    void aRequestThatEntersDuringAPauseWaitsForItAndResumes() throws Exception {
        Calls calls = new Calls();
        InstancePause pause = new InstancePause(calls);
        InFlightGate gate = new InFlightGate();
        CompletableFuture<InstancePause.Paused> pausing = CompletableFuture.supplyAsync(() -> {
            try {
                return pause.pauseIfIdle(gate);
            } catch (InstancePause.Failed e) {
                throw new IllegalStateException(e);
            }
        });
        calls.insidePause.await();
        assertTrue(gate.tryEnter()); // a request enters while the worker pauses
        CompletableFuture<Long> request = CompletableFuture.supplyAsync(() -> {
            try {
                long nanos = pause.resumeIfPaused((bytes, attempt) -> true);
                calls.order.add("generate");
                return nanos;
            } catch (InstancePause.Failed e) {
                throw new IllegalStateException(e);
            }
        });
        calls.finishPause.countDown();
        assertEquals(PAUSED, pausing.get());
        assertEquals(7, request.get());
        assertEquals(List.of("pause", "paused", "resume", "generate"), calls.order);
        assertNull(pause.paused());
        assertEquals(1, pause.pauses());
        assertEquals(1, pause.resumes());
    }

    @Test
    void aBusyInstanceIsNotPausedAndARunningOneNeedsNoResume() throws Exception {
        Calls calls = new Calls();
        InstancePause pause = new InstancePause(calls);
        InFlightGate gate = new InFlightGate();
        assertTrue(gate.tryEnter());
        assertNull(pause.pauseIfIdle(gate), "a request in flight keeps it running");
        assertEquals(0, pause.resumeIfPaused((bytes, attempt) -> true));
        assertEquals(List.of(), calls.order);
    }

    @Test
    void aRequestWaitingOnAPauseThatFailedGivesTheInstanceUp() throws Exception {
        Calls calls = new Calls();
        calls.failPause = true;
        InstancePause pause = new InstancePause(calls);
        InFlightGate gate = new InFlightGate();
        CompletableFuture<Throwable> pausing = CompletableFuture.supplyAsync(() -> {
            try {
                pause.pauseIfIdle(gate);
                return null;
            } catch (InstancePause.Failed e) {
                return e;
            }
        });
        calls.insidePause.await();
        assertTrue(gate.tryEnter());
        CompletableFuture<InstancePause.Failed> request = CompletableFuture.supplyAsync(() ->
                assertThrows(InstancePause.Failed.class, () -> pause.resumeIfPaused((bytes, attempt) -> true)));
        calls.finishPause.countDown();
        assertNotNull(pausing.get(), "the pause's failure reaches the caller, which evicts the model");
        InstancePause.Failed failed = request.get();
        assertFalse(failed.outOfMemory());
        assertTrue(failed.getMessage().contains("unmap failed"), failed.getMessage());
        assertFalse(calls.order.contains("resume"));
    }

    @Test
    void aResumeWithoutRoomFailsAsOutOfMemoryAndStaysPaused() throws Exception {
        Calls calls = new Calls();
        calls.finishPause.countDown();
        InstancePause pause = new InstancePause(calls);
        assertEquals(PAUSED, pause.pauseIfIdle(new InFlightGate()));
        InstancePause.Failed failed = assertThrows(InstancePause.Failed.class, () -> pause.resumeIfPaused((bytes, attempt) -> {
            assertEquals(PAUSED.pausedBytes(), bytes);
            return false;
        }));
        assertTrue(failed.outOfMemory());
        assertEquals(PAUSED, pause.paused());
        assertEquals(7, pause.resumeIfPaused((bytes, attempt) -> true));
        assertNull(pause.paused());
    }
}
