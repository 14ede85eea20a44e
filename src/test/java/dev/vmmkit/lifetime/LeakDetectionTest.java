package dev.vmmkit.lifetime;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** A tensor lost with a count above zero is found, reported with where it was made and used, and its memory given back. */
class LeakDetectionTest {
    private TensorDevice device;

    @RegisterExtension
    final NoLeaks noLeaks = new NoLeaks(() -> device);

    @AfterEach
    void close() {
        if (device != null) device.close();
    }

    @Test
    void aLeakMadeOnPurposeIsReportedAndItsMemoryGivenBack() {
        device = TestDevice.open(LeakDetector.Level.PARANOID);
        noLeaks.expect(1);
        leakOneTensor();
        assertEquals(64, device.liveBytes());
        NoLeaks.collectLeaks(device);
        assertEquals(1, device.leakDetector().leakCount());
        assertEquals(0, device.liveBytes(), "the leaked tensor's memory was given back");
        TensorStats stats = device.stats();
        assertEquals(1, stats.leaks());
        assertEquals(64, stats.leakedBytes());
        String report = device.leakDetector().reports().getFirst();
        assertTrue(report.startsWith("LEAK: Tensor float32[4, 4] (64 bytes"), report);
        assertTrue(report.contains("leakOneTensor"), "names where it was made: " + report);
        assertTrue(report.contains("(relu)") && report.contains("useIt"), "shows its last accesses: " + report);
    }

    private void leakOneTensor() {
        Tensor lost = device.full(1f, 4, 4);
        useIt(lost);
        // no release, no scope: unreachable from here on with count 1
    }

    private static void useIt(Tensor t) {
        Ops.relu(t).release();
    }

    @Test
    void tensorsReleasedInTimeAreNeverReported() {
        device = TestDevice.open(LeakDetector.Level.PARANOID);
        for (int i = 0; i < 100; i++) {
            try (Scope s = Scope.open()) {
                Ops.relu(device.full(1f, 16));
            }
        }
        NoLeaks.collectLeaks(device);
        assertEquals(0, device.leakDetector().leakCount());
        assertEquals(0, device.leakDetector().trackedCount());
    }

    @Test
    void aLeakIsFoundEvenWhenTheReferenceQueueNeverDeliversIt() {
        device = TestDevice.openWithoutReferenceQueue();
        noLeaks.expect(1);
        leakOneTensor();
        assertEquals(0, device.leakDetector().check(), "nothing can come through a queue that never delivers");
        assertEquals(1, device.leakDetector().collectAndCheck(), "found by looking at the tracked records themselves");
        assertEquals(0, device.liveBytes(), "the leaked tensor's memory was given back");
        assertEquals(0, device.leakDetector().trackedCount());
        String report = device.leakDetector().reports().getFirst();
        assertTrue(report.contains("leakOneTensor") && report.contains("(relu)"), report);
        assertEquals(1, device.leakDetector().collectAndCheck(), "a leak is reported once");
    }

    @Test
    void everyTensorLostBehindAnotherIsFoundByOneCheck() {
        device = TestDevice.openWithoutReferenceQueue();
        noLeaks.expect(20);
        loseAChainOfTensors(20);
        assertEquals(20, device.leakDetector().collectAndCheck());
        assertEquals(0, device.liveBytes());
    }

    /** Each tensor of the chain is reachable only from the next one's gradient function. */
    private void loseAChainOfTensors(int length) {
        Tensor t = device.full(1f, 4).requiresGrad(true);
        for (int i = 1; i < length; i++) t = Ops.relu(t);
        // dropped with every count above zero
    }

    @Test
    void tensorsClosedWhileTheDetectorSweepsAreNeverTakenForLeaks() throws Exception {
        device = TestDevice.openWithoutReferenceQueue();
        int threads = 3;
        CountDownLatch start = new CountDownLatch(1);
        try (ExecutorService pool = Executors.newFixedThreadPool(threads)) {
            List<Future<?>> workers = new ArrayList<>();
            for (int w = 0; w < threads; w++) {
                workers.add(pool.submit(() -> {
                    start.await();
                    for (int i = 0; i < 3000; i++) device.full(1f, 4).close();
                    return null;
                }));
            }
            start.countDown();
            int sweeps = 0;
            while (!workers.stream().allMatch(Future::isDone)) {
                assertEquals(0, device.leakDetector().sweep(), "a tensor closed just now is not a leak");
                if (++sweeps % 500 == 0) System.gc();
            }
            for (Future<?> worker : workers) worker.get();
        }
        assertEquals(0, device.leakDetector().collectAndCheck());
        assertEquals(0, device.leakDetector().trackedCount());
        assertEquals(0, device.liveBytes());
    }

    @Test
    void levelsTrackAllSomeOrNone() {
        device = TestDevice.open(LeakDetector.Level.PARANOID);
        LeakDetector simpleEveryTensor = new LeakDetector(LeakDetector.Level.SIMPLE, 1, (a, b) -> { });
        LeakDetector disabled = new LeakDetector(LeakDetector.Level.DISABLED, 1, (a, b) -> { });
        try (Tensor t = device.zeros(2)) {
            assertTrue(simpleEveryTensor.track(t) != null);
            assertEquals(null, disabled.track(t));
        }
        LeakDetector sampling = new LeakDetector(LeakDetector.Level.SIMPLE, 1_000_000, (a, b) -> { });
        int tracked = 0;
        try (Tensor t = device.zeros(2)) {
            for (int i = 0; i < 1000; i++) if (sampling.track(t) != null) tracked++;
        }
        assertTrue(tracked < 5, "simple samples: " + tracked + " of 1000 tracked");
    }

    @Test
    void theLevelComesFromItsNameAndABadNameIsAClearError() {
        assertEquals(LeakDetector.Level.PARANOID, LeakDetector.Level.parse(" Paranoid "));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> LeakDetector.Level.parse("loud"));
        assertTrue(e.getMessage().contains("disabled, simple, paranoid"), e.getMessage());
    }
}
