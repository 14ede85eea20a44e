package dev.vmmkit.core;

import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The put-off on its own: what ends a wait, and what never starts one. Waits are ordered by observing the waiter, never by sleeping. */
class SynchronisationPutOffTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(20);
    private static final long LONG = TimeUnit.MINUTES.toNanos(10);

    @Test
    void withNoGraceAndNoSlowPathInItsDriverCallsNothingWaits() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            new SynchronisationPutOff(0, LONG).await(() -> false);
            new SynchronisationPutOff(0, 0).await(() -> false);
        });
    }

    @Test
    void aGraceEndsWhenWhatTheWaiterChecksSaysSoAndItIsWoken() throws Exception {
        SynchronisationPutOff putOff = new SynchronisationPutOff(LONG, 0);
        AtomicBoolean ended = new AtomicBoolean();
        Thread waiter = Thread.ofPlatform().start(() -> putOff.await(ended::get));
        assertTimeoutPreemptively(TIMEOUT, () -> {
            while (!putOff.waiting()) Thread.onSpinWait();
            ended.set(true);
            putOff.wakeIfWaiting();
            waiter.join();
        });
        assertFalse(putOff.waiting());
    }

    @Test
    void aSlowPathLeavingItsDriverCallsDuringTheGraceWakesNobody() throws Exception {
        SynchronisationPutOff putOff = new SynchronisationPutOff(LONG, LONG);
        AtomicBoolean ended = new AtomicBoolean();
        putOff.requestDriving();
        Thread waiter = Thread.ofPlatform().start(() -> putOff.await(ended::get));
        assertTimeoutPreemptively(TIMEOUT, () -> {
            while (!putOff.waiting()) Thread.onSpinWait();
            assertFalse(putOff.pastGrace(), "inside its grace the thread waits for the grace, not for slow paths");
            putOff.requestDriven();
            assertEquals(0, putOff.wakeUps(), "the wake-up would find the grace still running");
            ended.set(true);
            putOff.wakeIfWaiting();
            waiter.join();
        });
        assertEquals(1, putOff.wakeUps());
        assertFalse(putOff.waiting());
    }

    @Test
    void aHoldLastsUntilTheLastSlowPathLeavesItsDriverCalls() throws Exception {
        SynchronisationPutOff putOff = new SynchronisationPutOff(0, LONG);
        putOff.requestDriving();
        putOff.requestDriving();
        Thread waiter = Thread.ofPlatform().start(() -> putOff.await(() -> false));
        assertTimeoutPreemptively(TIMEOUT, () -> {
            while (!putOff.pastGrace()) Thread.onSpinWait();
            putOff.requestDriven();
            assertTrue(putOff.waiting(), "one slow path is still inside its driver calls");
            assertEquals(1, putOff.requestsDriving());
            putOff.requestDriven(); // the last one leaves: it wakes the waiter
            waiter.join();
        });
        assertEquals(0, putOff.requestsDriving());
    }
}
