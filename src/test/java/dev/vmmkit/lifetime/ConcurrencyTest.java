package dev.vmmkit.lifetime;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** Tensors shared by threads: retains and releases from all of them, and no update is lost. */
class ConcurrencyTest {
    private static final int THREADS = 4;
    private TensorDevice device;

    @RegisterExtension
    final NoLeaks noLeaks = new NoLeaks(() -> device);

    @BeforeEach
    void open() {
        device = TestDevice.open(LeakDetector.Level.SIMPLE);
    }

    @AfterEach
    void close() {
        device.close();
    }

    @Test
    void concurrentRetainsAndReleasesLoseNoUpdate() throws Exception {
        Tensor[] shared = new Tensor[8];
        for (int i = 0; i < shared.length; i++) shared[i] = device.zeros(16);
        List<Future<?>> done = new ArrayList<>();
        CountDownLatch start = new CountDownLatch(1);
        ExecutorService pool = Executors.newFixedThreadPool(THREADS);
        try {
            for (int thread = 0; thread < THREADS; thread++) {
                long seed = thread;
                done.add(pool.submit(() -> {
                    SplittableRandom random = new SplittableRandom(seed);
                    int[] held = new int[shared.length];
                    start.await();
                    for (int step = 0; step < 20_000; step++) {
                        int i = random.nextInt(shared.length);
                        if (held[i] > 0 && random.nextBoolean()) {
                            shared[i].release();
                            held[i]--;
                        } else {
                            shared[i].retain();
                            held[i]++;
                        }
                    }
                    for (int i = 0; i < shared.length; i++) {
                        for (; held[i] > 0; held[i]--) shared[i].release();
                    }
                    return null;
                }));
            }
            start.countDown();
            for (Future<?> f : done) f.get();
        } finally {
            pool.shutdown();
        }
        for (Tensor t : shared) assertEquals(1, t.refCnt());
        assertEquals(8 * 64, device.liveBytes());
        for (Tensor t : shared) t.release();
        assertEquals(0, device.liveBytes());
    }

    @Test
    void exactlyOneOfManyRacingReleasesFreesTheTensor() throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(THREADS);
        try {
            for (int round = 0; round < 200; round++) {
                Tensor t = device.zeros(4);
                for (int i = 1; i < THREADS; i++) t.retain();
                CountDownLatch start = new CountDownLatch(1);
                List<Future<Boolean>> freed = new ArrayList<>();
                for (int i = 0; i < THREADS; i++) {
                    freed.add(pool.submit(() -> {
                        start.await();
                        return t.release();
                    }));
                }
                start.countDown();
                int frees = 0;
                for (Future<Boolean> f : freed) if (f.get()) frees++;
                assertEquals(1, frees);
                assertEquals(0, device.liveBytes());
            }
        } finally {
            pool.shutdown();
        }
    }

    @Test
    void threadsWithTheirOwnScopesShareTheDevice() throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(THREADS);
        try (Tensor weights = device.full(0.5f, 8, 8)) {
            List<Future<Float>> results = new ArrayList<>();
            for (int thread = 0; thread < THREADS; thread++) {
                results.add(pool.submit(() -> {
                    float last = 0;
                    for (int i = 0; i < 50; i++) {
                        try (Scope s = Scope.open()) {
                            last = Ops.sum(Ops.matmul(weights, device.full(1f, 8, 8))).item();
                        }
                    }
                    return last;
                }));
            }
            for (Future<Float> f : results) assertEquals(256f, f.get(), 1e-3f);
            assertEquals(1, weights.refCnt());
        } finally {
            pool.shutdown();
        }
        assertEquals(0, device.liveBytes());
    }
}
