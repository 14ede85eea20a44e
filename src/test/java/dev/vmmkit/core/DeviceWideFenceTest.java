package dev.vmmkit.core;

import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.StreamEvents;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static dev.vmmkit.core.DeviceSyncGate.fenceThreadsSince;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The fence on its own, over a device whose synchronisations a test lets through one by one. */
class DeviceWideFenceTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(20);

    private final Set<Thread> threadsBefore = fenceThreadsSince(Set.of());
    private final DeviceSyncGate gate = new DeviceSyncGate();
    private final AtomicInteger failuresToInject = new AtomicInteger();
    private final AtomicInteger synchronisations = new AtomicInteger();
    private final DeviceWideFence fence = new DeviceWideFence(new OnlyDeviceSync());

    @AfterEach
    void close() {
        gate.open();
        assertTimeoutPreemptively(TIMEOUT, fence::close);
    }

    /** A started thread readies itself and parks: it synchronises nothing that nobody asked for. */
    @Test
    void nothingRunsUntilATicketIsRequested() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            fence.start();
            Set<Thread> serving = fenceThreadsSince(threadsBefore);
            assertEquals(1, serving.size(), "start makes the fence's thread");
            Thread thread = serving.iterator().next();
            // Parked (or held at the gate, which the count below would show): its start is over.
            while (thread.getState() != Thread.State.WAITING) Thread.onSpinWait();
            assertEquals(0, fence.completedTicket());
            assertEquals(0, gate.arrived(), "no synchronisation without a request");
        });
    }

    @Test
    void aSynchronisationCompletesOnlyTheTicketsIssuedBeforeItStarted() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            long first = fence.request();
            gate.awaitArrivals(1);                  // the first synchronisation is under way
            long second = fence.request();
            long third = fence.request();
            gate.letThrough(1);
            fence.await(first);
            assertEquals(first, fence.completedTicket(),
                    "tickets issued while a synchronisation ran may cover work it does not wait for");
            gate.awaitArrivals(2);
            assertTrue(fence.completedTicket() < second);
            gate.letThrough(1);
            fence.await(third);
            assertEquals(third, fence.completedTicket());
            assertEquals(2, synchronisations.get(), "the second and third requests shared one synchronisation");
        });
    }

    @Test
    void aFailedSynchronisationIsRetriedAndItsTicketsAreKept() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            gate.open();
            failuresToInject.set(3);
            long ticket = fence.request();
            while (fence.completedTicket() < ticket) Thread.sleep(1); // no further request: the retries alone
            assertEquals(4, synchronisations.get(), "three failures, then the retry that worked");
        });
    }

    @Test
    void awaitReportsAFailureOfTheSynchronisationThatWouldHaveCompletedItsTicket() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            gate.open();
            failuresToInject.set(Integer.MAX_VALUE);
            long ticket = fence.request();
            DriverException e = assertThrows(DriverException.class, () -> fence.await(ticket));
            assertEquals(CudaResult.ILLEGAL_ADDRESS, e.result());
            failuresToInject.set(0);
            fence.await(fence.request());
            assertTrue(fence.completedTicket() >= ticket);
        });
    }

    /**
     * A region's published free needs no ticket: the thread turns it into one of its own, and the
     * synchronisation covers what was published before it started, not what came while it ran.
     */
    @Test
    void publishedFreesAreCoveredByTheFirstSynchronisationThatStartsAfterThem() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            DeviceWideFrees region = fence.register();
            DeviceWideFrees idle = fence.register();
            region.publish(5);
            fence.wake();
            gate.awaitArrivals(1); // it read 5 and is held
            region.publish(7);
            fence.wake();
            assertEquals(0, region.covered(), "nothing is covered while the synchronisation runs");
            assertFalse(fence.awaitCovered(region, 5, 100_000), "a timed wait gives up while the device is busy");
            gate.letThrough(1);
            while (!fence.awaitCovered(region, 5, 1_000_000)) Thread.onSpinWait();
            assertEquals(5, region.covered(), "the free published while it ran is not covered by it");
            gate.awaitArrivals(2); // the next one, asked for by the second publish alone
            gate.letThrough(1);
            while (!fence.awaitCovered(region, 7, 1_000_000)) Thread.onSpinWait();
            assertEquals(7, region.covered());
            assertEquals(0, idle.covered(), "a region that published nothing has nothing covered");
            assertEquals(2, fence.completedTicket(), "one ticket of the thread's own per synchronisation");
        });
    }

    /**
     * A lone synchronisation for frees nobody waits for waits while an allocation is inside its
     * driver calls (a synchronisation beside them slows them), and runs once the allocation leaves.
     */
    @Test
    void aLoneSynchronisationWaitsWhileAnAllocationIsInsideItsDriverCalls() {
        try (DeviceWideFence held = new DeviceWideFence(new OnlyDeviceSync(), 0, TimeUnit.MINUTES.toNanos(10))) {
            assertTimeoutPreemptively(TIMEOUT, () -> {
                DeviceWideFrees region = putOffLoneSynchronisation(held, true);
                held.requestDriven();
                gate.awaitArrivals(1);
                gate.letThrough(1);
                while (!held.awaitCovered(region, 1, 1_000_000)) Thread.onSpinWait();
                assertEquals(0, held.requestsDriving());
            });
        }
    }

    /** Nothing anyone waits for is held: a ticket requested ends the hold. */
    @Test
    void aRequestedSynchronisationIsNotHeldBehindAnAllocationsDriverCalls() {
        try (DeviceWideFence held = new DeviceWideFence(new OnlyDeviceSync(), 0, TimeUnit.MINUTES.toNanos(10))) {
            assertTimeoutPreemptively(TIMEOUT, () -> {
                DeviceWideFrees region = putOffLoneSynchronisation(held, true);
                long ticket = held.request();
                gate.awaitArrivals(1); // the request ended the hold
                gate.letThrough(1);
                held.await(ticket);
                assertEquals(1, region.covered(), "the free published before it is covered too");
            });
        }
    }

    /** Nor a wait for the published frees. */
    @Test
    void aWaitForTheFreesEndsTheHold() {
        try (DeviceWideFence held = new DeviceWideFence(new OnlyDeviceSync(), 0, TimeUnit.MINUTES.toNanos(10))) {
            assertTimeoutPreemptively(TIMEOUT, () -> {
                DeviceWideFrees region = putOffLoneSynchronisation(held, true);
                gate.open();
                assertTrue(held.awaitCovered(region, 1, TimeUnit.SECONDS.toNanos(10)));
            });
        }
    }

    /**
     * A lone free's synchronisation waits out its grace, so that it does not run beside the
     * program's next driver calls, unless a slow path could use the memory: a hurry ends the grace.
     */
    @Test
    void aLoneFreesSynchronisationWaitsOutItsGraceUnlessASlowPathHurriesIt() {
        try (DeviceWideFence graced = new DeviceWideFence(new OnlyDeviceSync(), TimeUnit.MINUTES.toNanos(10), 0)) {
            assertTimeoutPreemptively(TIMEOUT, () -> {
                DeviceWideFrees region = putOffLoneSynchronisation(graced, false);
                graced.hurry();
                gate.awaitArrivals(1);
                gate.letThrough(1);
                while (!graced.awaitCovered(region, 1, 1_000_000)) Thread.onSpinWait();
            });
        }
    }

    /**
     * Starts {@code fence}, enters a slow path's driver calls (when {@code driving}; the caller leaves
     * them), publishes a free, and returns once the thread puts its synchronisation off.
     */
    private DeviceWideFrees putOffLoneSynchronisation(DeviceWideFence fence, boolean driving) {
        fence.start();
        DeviceWideFrees region = fence.register();
        if (driving) fence.requestDriving();
        region.publish(1);
        fence.wake();
        while (!fence.holding()) Thread.onSpinWait();
        assertEquals(0, gate.arrived(), "nothing is synchronised while it is put off");
        return region;
    }

    @Test
    void aForgottenRegionIsNoLongerRead() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            gate.open();
            DeviceWideFrees region = fence.register();
            region.publish(3);
            fence.forget(region);
            fence.await(fence.request());
            assertEquals(0, region.covered(), "a closed region's frees are not covered any more");
        });
    }

    @Test
    void closeStopsTheThreadAndLaterWaitsFail() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            gate.open();
            fence.await(fence.request());
            assertEquals(1, fenceThreadsSince(threadsBefore).size(), "one thread serves the fence");
            fence.close();
            assertEquals(Set.of(), fenceThreadsSince(threadsBefore), "the fence's thread is gone after close");
            long late = fence.request();
            assertThrows(IllegalStateException.class, () -> fence.await(late));
        });
    }

    /**
     * A device synchronisation would invalidate a stream capture: none runs while one is under
     * way. A wait without a limit fails at once rather than block a capturing thread, a timed one
     * gives up, and the capture's end lets the synchronisation run.
     */
    @Test
    void noSynchronisationRunsWhileAStreamCaptureIsUnderWay() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            gate.open();
            StreamCaptures captures = fence.captures();
            captures.beginning();
            DeviceWideFrees region = fence.register();
            region.publish(1);
            fence.wake();
            long ticket = fence.request();
            DriverException e = assertThrows(DriverException.class, () -> fence.await(ticket));
            assertEquals(CudaResult.STREAM_CAPTURE_UNSUPPORTED, e.result());
            assertFalse(fence.awaitCovered(region, 1, TimeUnit.MINUTES.toNanos(10)), "a timed wait gives up");
            assertEquals(0, synchronisations.get(), "nothing was synchronised during the capture");
            captures.ended();
            fence.await(ticket);
            assertEquals(1, region.covered(), "the free published during the capture is covered after it");
        });
    }

    /** Memory freed before a capture serves allocations made during it: the capture's begin synchronises first. */
    @Test
    void freesPublishedBeforeACaptureAreCoveredAsItBegins() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            gate.open();
            DeviceWideFrees region = fence.register();
            region.publish(2);
            fence.captures().beginning();
            assertEquals(2, region.covered());
            assertTrue(fence.captures().underway());
            fence.captures().ended();
        });
    }

    /** A capture that begins while a synchronisation runs waits for it to return. */
    @Test
    void aCaptureBeginsOnlyOnceTheSynchronisationInProgressHasReturned() {
        assertTimeoutPreemptively(TIMEOUT, () -> {
            StreamCaptures captures = fence.captures();
            long ticket = fence.request();
            gate.awaitArrivals(1); // the synchronisation is under way
            Thread capturing = Thread.ofPlatform().start(captures::beginning);
            while (capturing.getState() != Thread.State.WAITING) Thread.onSpinWait();
            assertFalse(captures.underway(), "the capture has not begun while the device synchronises");
            gate.letThrough(1);
            capturing.join();
            assertTrue(captures.underway());
            fence.await(ticket);
            captures.ended();
            assertFalse(captures.underway());
        });
    }

    /** Events whose one working call is synchronizeDevice: through the gate, failing when asked to. */
    private final class OnlyDeviceSync implements StreamEvents {
        @Override
        public void synchronizeDevice() {
            gate.pass();
            synchronisations.incrementAndGet();
            if (failuresToInject.getAndUpdate(n -> n > 0 ? n - 1 : 0) > 0) {
                throw DriverException.of(CudaResult.ILLEGAL_ADDRESS, "cuCtxSynchronize()");
            }
        }

        @Override
        public long create() {
            throw new UnsupportedOperationException();
        }

        @Override
        public void record(long event, long stream) {
            throw new UnsupportedOperationException();
        }

        @Override
        public boolean isComplete(long event) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void synchronize(long event) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void destroy(long event) {
            throw new UnsupportedOperationException();
        }
    }
}
