package dev.vmmkit.core;

import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The tickets' waiting rules, with the test in the serving thread's place: each waiter is let
 * reach its monitor wait before the test completes, fails or closes what it waits for.
 */
@Timeout(20) // a hang guard only: nothing here waits on time
class SynchronisationTicketsTest {
    private static final long LONG_NANOS = TimeUnit.MINUTES.toNanos(10);

    private final StreamCaptures captures = new StreamCaptures(() -> { });
    private final SynchronisationTickets tickets = new SynchronisationTickets(captures, null);

    @Test
    void aFailureFailsTheWaitsForTicketsUpToItsTargetAndNoLaterOnes() throws Exception {
        long first = tickets.issue();
        long second = tickets.issue();
        long third = tickets.issue();
        CompletableFuture<Object> waitForSecond = asleep(() -> {
            tickets.await(second);
            return null;
        });
        CompletableFuture<Object> waitForThird = asleep(() -> tickets.awaitUnlessCapturing(third));
        tickets.failed(second, DriverException.of(CudaResult.ILLEGAL_ADDRESS, "cuCtxSynchronize()"));

        DriverException woken = assertInstanceOf(DriverException.class, failureOf(waitForSecond));
        assertEquals(CudaResult.ILLEGAL_ADDRESS, woken.result(), "the waiter gets the failure of its synchronisation");
        assertThrows(DriverException.class, () -> tickets.await(first), "a ticket before the failed one fails too");
        assertFalse(tickets.await(second, LONG_NANOS), "a timed wait gives up at once rather than throw");
        tickets.completedUpTo(third);
        assertEquals(true, waitForThird.get(), "a later ticket waited on through the failure and completed");
    }

    @Test
    void closeWakesEveryWaiterAndFailsLaterWaits() throws Exception {
        long ticket = tickets.issue();
        DeviceWideFrees frees = new DeviceWideFrees();
        frees.publish(1);
        CompletableFuture<Object> untimed = asleep(() -> {
            tickets.await(ticket);
            return null;
        });
        CompletableFuture<Object> timed = asleep(() -> tickets.await(ticket, LONG_NANOS));
        CompletableFuture<Object> forFrees = asleep(() -> tickets.awaitCovered(frees, 1, LONG_NANOS));

        assertTrue(tickets.close());
        assertInstanceOf(IllegalStateException.class, failureOf(untimed));
        assertEquals(false, timed.get());
        assertEquals(false, forFrees.get());
        assertThrows(IllegalStateException.class, () -> tickets.await(ticket));
        assertFalse(tickets.close(), "closed once");
    }

    /** A capture under way fails the waits without a time limit once woken; a timed one waits on. */
    @Test
    void aCaptureFailsTheWaitsWithoutATimeLimit() throws Exception {
        long ticket = tickets.issue();
        CompletableFuture<Object> untimed = asleep(() -> tickets.awaitUnlessCapturing(ticket));
        CompletableFuture<Object> timed = asleep(() -> tickets.await(ticket, LONG_NANOS));
        captures.beginning();
        tickets.wakeWaits();
        assertEquals(false, untimed.get());
        assertThrows(DriverException.class, () -> tickets.await(ticket));
        captures.ended();
        tickets.completedUpTo(ticket);
        assertEquals(true, timed.get());
    }

    /** Without a thread to serve them, the tickets are served at issue and inside a wait that needs it. */
    @Test
    void withoutAThreadTicketsAreServedOnTheCallingThread() {
        List<Long> served = new ArrayList<>();
        SynchronisationTickets[] here = new SynchronisationTickets[1];
        here[0] = new SynchronisationTickets(captures, target -> {
            served.add(target);
            here[0].completedUpTo(target);
        });
        long issuedAndServed = here[0].issueAndServeHere();
        assertEquals(issuedAndServed, here[0].completedTicket());
        long unserved = here[0].issue();
        here[0].await(unserved);
        assertEquals(List.of(issuedAndServed, unserved), served);
    }

    /** Runs {@code wait} on a thread of its own; returns once that thread sleeps on a monitor. */
    private static CompletableFuture<Object> asleep(Callable<Object> wait) {
        CompletableFuture<Object> result = new CompletableFuture<>();
        Thread waiter = Thread.ofPlatform().daemon().start(() -> {
            try {
                result.complete(wait.call());
            } catch (Throwable e) {
                result.completeExceptionally(e);
            }
        });
        Thread.State state;
        while ((state = waiter.getState()) != Thread.State.WAITING && state != Thread.State.TIMED_WAITING) {
            assertFalse(result.isDone(), "the wait returned before anything woke it: " + result);
            Thread.onSpinWait();
        }
        return result;
    }

    private static Throwable failureOf(CompletableFuture<Object> result) throws InterruptedException {
        return assertThrows(ExecutionException.class, result::get).getCause();
    }
}
