package dev.vmmkit.driver.host;

import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class HostEventsTest {
    private final HostDriver driver = HostDriver.open();
    private final HostEvents events = driver.hostEvents();

    @AfterEach
    void close() {
        driver.close();
    }

    @Test
    void recordedEventsCompleteAtOnceByDefault() {
        long event = events.create();
        assertTrue(events.isComplete(event), "never recorded");
        events.record(event, 0);
        assertTrue(events.isComplete(event));
        events.synchronize(event);
        assertEquals(0, events.waitCount(), "nothing to wait for");
        events.destroy(event);
    }

    @Test
    void heldEventsStayPendingUntilCompleted() {
        events.holdCompletion(true);
        long onStream1 = events.create();
        long onStream2 = events.create();
        events.record(onStream1, 1);
        events.record(onStream2, 2);
        assertFalse(events.isComplete(onStream1));
        assertEquals(2, events.pendingCount());

        assertEquals(1, events.completeStream(2));
        assertTrue(events.isComplete(onStream2));
        assertFalse(events.isComplete(onStream1));

        events.holdCompletion(false);
        assertFalse(events.isComplete(onStream1), "turning hold off leaves held events pending");
        assertEquals(1, events.completeAll());
        assertTrue(events.isComplete(onStream1));
        assertEquals(0, events.pendingCount());
        events.destroy(onStream1);
        events.destroy(onStream2);
    }

    @Test
    void synchronizeCompletesAHeldEventAndCountsAsAWait() {
        events.holdCompletion(true);
        long event = events.create();
        events.record(event, 7);
        events.synchronize(event);
        assertTrue(events.isComplete(event));
        assertEquals(1, events.waitCount());
        events.synchronize(event);
        assertEquals(1, events.waitCount(), "a complete event needs no wait");
        events.record(event, 7); // recording again makes it pending again
        assertFalse(events.isComplete(event));
        events.destroy(event);
        assertEquals(0, events.pendingCount(), "a destroyed event is no longer pending");
    }

    @Test
    void synchronizeDeviceCompletesEveryHeldEventAsOneWait() {
        events.synchronizeDevice();
        assertEquals(0, events.waitCount(), "nothing held: nothing to wait for");
        events.holdCompletion(true);
        long onStream1 = events.create();
        long onStream2 = events.create();
        events.record(onStream1, 1);
        events.record(onStream2, 2);
        events.synchronizeDevice();
        assertTrue(events.isComplete(onStream1));
        assertTrue(events.isComplete(onStream2));
        assertEquals(0, events.pendingCount());
        assertEquals(1, events.waitCount(), "one wait for the whole device");
        events.record(onStream1, 1); // work submitted after the synchronisation stays pending
        assertFalse(events.isComplete(onStream1));
        events.destroy(onStream1);
        events.destroy(onStream2);
        driver.close();
        expect(CudaResult.DEINITIALIZED, events::synchronizeDevice);
    }

    @Test
    void unknownAndDestroyedEventsAreInvalidHandles() {
        long event = events.create();
        events.destroy(event);
        expect(CudaResult.INVALID_HANDLE, () -> events.isComplete(event));
        expect(CudaResult.INVALID_HANDLE, () -> events.record(event, 0));
        expect(CudaResult.INVALID_HANDLE, () -> events.synchronize(event));
        expect(CudaResult.INVALID_HANDLE, () -> events.destroy(event));
        expect(CudaResult.INVALID_HANDLE, () -> events.isComplete(999));
        assertTrue(events.create() > event, "event ids are never reused");
    }

    @Test
    void eventsOfAClosedDriverAreDeinitialized() {
        long event = events.create();
        driver.close();
        expect(CudaResult.DEINITIALIZED, events::create);
        expect(CudaResult.DEINITIALIZED, () -> events.isComplete(event));
    }

    private static void expect(int code, Executable call) {
        DriverException e = assertThrows(DriverException.class, call);
        assertEquals(code, e.result(), e.getMessage());
    }
}
