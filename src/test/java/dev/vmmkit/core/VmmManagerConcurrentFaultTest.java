package dev.vmmkit.core;

import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverCall;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.FaultInjectingDriver;
import dev.vmmkit.driver.FaultPlan;
import dev.vmmkit.driver.host.HostDriver;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.stream.LongStream;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CyclicBarrier;

import static dev.vmmkit.core.AllocatorTestSupport.MIB;
import static dev.vmmkit.core.AllocatorTestSupport.PAGE;
import static dev.vmmkit.core.AllocatorTestSupport.assertFullyIntact;
import static dev.vmmkit.core.AllocatorTestSupport.assertSampleIntact;
import static dev.vmmkit.core.AllocatorTestSupport.fill;
import static dev.vmmkit.core.AllocatorTestSupport.hostDriver;
import static dev.vmmkit.core.AllocatorTestSupport.randomSize;
import static dev.vmmkit.core.AllocatorTestSupport.smallConfig;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Threads allocating, freeing, resizing, remapping, draining, and pausing and resuming a tag of
 * their own on one manager with its own fence thread, while random driver calls of every kind fail.
 * Each thread fills its allocations with its own pattern and checks them: whatever interleaving the
 * threads and faults take, a refused call leaves every buffer as it was, no two live allocations
 * share memory, and once the faults stop and everything is freed, the figures equal the driver's
 * and the close leaves the driver holding nothing.
 */
class VmmManagerConcurrentFaultTest {
    private static final int THREADS = 5;
    private static final int FAULTY_OPS = 400;
    private static final int CLEAN_OPS = 100;
    private static final long[] STREAMS = {0, 1, 2, VmmManager.DEVICE_WIDE_STREAM};
    private static final DriverCall[] KINDS = {DriverCall.CREATE, DriverCall.MAP, DriverCall.SET_ACCESS, DriverCall.UNMAP,
            DriverCall.RELEASE, DriverCall.EVENT_RECORD, DriverCall.EVENT_QUERY, DriverCall.DEVICE_SYNCHRONIZE,
            DriverCall.EVENT_CREATE, DriverCall.EVENT_SYNCHRONIZE};

    private record Buffer(long address, long size, long pattern, long stream) {}

    static LongStream chosenSeeds() {
        return AllocatorTestSupport.seeds(1, 2, 3, 4, 5, 6);
    }

    @ParameterizedTest(name = "seed {0}")
    @MethodSource("chosenSeeds")
    void threadsUnderRandomFaultsLeaveEveryBufferAndFigureRight(long seed) throws Exception {
        SplittableRandom rng = new SplittableRandom(seed);
        FaultPlan plan = new FaultPlan(seed);
        for (DriverCall kind : KINDS) {
            if (rng.nextInt(3) == 0) continue;
            plan.failWithProbability(kind, 0.002 + rng.nextDouble() * 0.03, rng.nextBoolean() ? CudaResult.OUT_OF_MEMORY : CudaResult.INVALID_VALUE);
        }
        long capacity = (20 + rng.nextInt(40)) * MIB;
        try (HostDriver host = hostDriver(capacity)) {
            VmmManager m = new VmmManager(new FaultInjectingDriver(host, plan), smallConfig(256 * MIB));
            if (rng.nextBoolean()) m.useWholePagesFrom(0); // every large copy may become a remap
            CyclicBarrier faultsOff = new CyclicBarrier(THREADS, plan::clear);
            ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
            List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < THREADS; t++) {
                Worker worker = new Worker(m, host, t == THREADS - 1 ? "tag" : null, rng.nextLong(), capacity / THREADS / 3,
                        "seed " + seed + ", thread " + t);
                threads.add(Thread.ofPlatform().start(() -> {
                    try {
                        worker.run(faultsOff);
                    } catch (Throwable e) {
                        failures.add(e);
                        faultsOff.reset(); // the others stop waiting
                    }
                }));
            }
            for (Thread t : threads) t.join();
            if (!failures.isEmpty()) throw new AssertionError("a thread failed", failures.peek());
            m.drain();
            AllocatorStats s = m.stats();
            assertEquals(0, s.liveBytes(), "every thread freed what it allocated: " + s);
            assertEquals(host.usage().aliveBytes(), s.reservedBytes(), "the figures equal the driver's");
            m.close();
            assertTrue(host.usage().isEmpty(), "after close the driver holds nothing: " + host.usage());
        }
    }

    /** One thread's program; a thread with a tag allocates in it (kept or not) and pauses it. */
    private static final class Worker {
        private final VmmManager m;
        private final HostDriver host;
        private final String tag;
        private final SplittableRandom rng;
        private final long maxLiveBytes;
        private final String note;
        private final boolean keep;
        private final List<Buffer> live = new ArrayList<>();
        /** Aliases and destinations that lost their pages: they may only be freed. */
        private final Set<Long> freeOnly = new HashSet<>();
        private boolean paused;

        Worker(VmmManager m, HostDriver host, String tag, long seed, long maxLiveBytes, String note) {
            this.m = m;
            this.host = host;
            this.tag = tag;
            this.rng = new SplittableRandom(seed);
            this.maxLiveBytes = maxLiveBytes;
            this.note = note;
            this.keep = rng.nextBoolean();
        }

        void run(CyclicBarrier faultsOff) throws Exception {
            for (int op = 0; op < FAULTY_OPS + CLEAN_OPS; op++) {
                if (op == FAULTY_OPS) faultsOff.await();
                String ctx = note + ", op " + op;
                try {
                    step(ctx, op >= FAULTY_OPS);
                } catch (DriverException | OutOfDeviceMemoryException | TagTransitionException | RemapLostPagesException e) {
                    if (op >= FAULTY_OPS) throw new AssertionError(ctx + ": refused with no fault planned", e);
                    if (e instanceof TagTransitionException) paused = true; // partly done: a resume finishes or undoes it
                }
                if (op % 40 == 0 && !paused) {
                    for (Buffer b : live) if (!freeOnly.contains(b.address)) assertSampleIntact(host, b.address, b.size, b.pattern, ctx);
                }
            }
            if (paused) resume(note + ", end");
            for (Buffer b : live) {
                if (!freeOnly.contains(b.address)) assertFullyIntact(host, b.address, b.size, b.pattern, note + ", end");
                m.deallocate(b.address, b.stream);
            }
        }

        private void step(String ctx, boolean clean) {
            int dice = rng.nextInt(100);
            if (paused) {
                if (dice < 30 || clean) {
                    resume(ctx);
                } else if (dice < 50 && !live.isEmpty()) {
                    Buffer b = live.remove(rng.nextInt(live.size())); // frees of a paused tag work
                    m.deallocate(b.address, b.stream);
                }
                return;
            }
            long liveBytes = live.stream().mapToLong(Buffer::size).sum();
            if (liveBytes > maxLiveBytes && !live.isEmpty()) dice = 60;
            if (dice < 45 || live.isEmpty()) allocate(ctx);
            else if (dice < 80) free(ctx);
            else if (dice < 88 && tag == null) reallocate(ctx);
            else if (dice < 94 && tag == null) remapCopy(ctx);
            else if (dice < 97 && tag != null) pause();
            else if (dice < 99) m.drain();
        }

        private void allocate(String ctx) {
            long size = rng.nextInt(8) == 0 ? 1 + rng.nextLong(24 * PAGE) : randomSize(rng, 8 * PAGE);
            long stream = STREAMS[rng.nextInt(STREAMS.length)];
            long address;
            if (tag != null) {
                m.beginTagRegion(tag, keep);
                try {
                    address = m.allocate(size, stream);
                } finally {
                    m.endTagRegion();
                }
            } else {
                address = m.allocate(size, stream);
            }
            long pattern = rng.nextLong();
            fill(host, address, size, pattern, ctx);
            live.add(new Buffer(address, size, pattern, stream));
        }

        private void free(String ctx) {
            Buffer b = live.remove(rng.nextInt(live.size()));
            if (!freeOnly.remove(b.address)) assertFullyIntact(host, b.address, b.size, b.pattern, ctx + " (at free)");
            m.deallocate(b.address, b.stream);
        }

        private void reallocate(String ctx) {
            int i = rng.nextInt(live.size());
            Buffer b = live.get(i);
            if (freeOnly.contains(b.address)) return;
            long newSize = rng.nextBoolean() ? b.size + 1 + rng.nextLong(2 * b.size) : 1 + rng.nextLong(b.size);
            long moved;
            try {
                moved = m.reallocate(b.address, newSize, b.stream);
            } catch (RuntimeException e) {
                assertFullyIntact(host, b.address, b.size, b.pattern, ctx + " (a refused reallocate leaves the buffer)");
                throw e;
            }
            assertFullyIntact(host, moved, Math.min(b.size, newSize), b.pattern, ctx + " (after reallocate)");
            long pattern = rng.nextLong();
            fill(host, moved, newSize, pattern, ctx);
            live.set(i, new Buffer(moved, newSize, pattern, b.stream));
        }

        private void remapCopy(String ctx) {
            Buffer src = live.get(rng.nextInt(live.size()));
            if (freeOnly.contains(src.address)) return;
            long dst = m.allocate(src.size + rng.nextLong(src.size + 1), src.stream);
            Buffer target = new Buffer(dst, m.sizeOf(dst), rng.nextLong(), src.stream);
            fill(host, dst, target.size, target.pattern, ctx);
            live.add(target);
            long stream = src.stream == VmmManager.DEVICE_WIDE_STREAM ? 0 : src.stream;
            boolean remapped;
            try {
                remapped = m.remapCopy(dst, src.address, src.size, stream);
            } catch (RemapLostPagesException e) {
                freeOnly.add(dst);
                throw e;
            }
            assertFullyIntact(host, src.address, src.size, src.pattern, ctx + " (the source)");
            if (!remapped) {
                assertFullyIntact(host, dst, target.size, target.pattern, ctx + " (not remapped)");
                return;
            }
            assertFullyIntact(host, dst, src.size, src.pattern, ctx + " (remapped)");
            long pattern = rng.nextLong();
            fill(host, dst, target.size, pattern, ctx);
            live.set(live.size() - 1, new Buffer(dst, target.size, pattern, src.stream));
            freeOnly.add(src.address); // an alias of the destination now
        }

        private void pause() {
            paused = true; // before the call: a pause that fails partway is resumed too
            m.pause(tag);
        }

        private void resume(String ctx) {
            m.resume(tag);
            paused = false;
            for (Buffer b : live) {
                if (keep) assertFullyIntact(host, b.address, b.size, b.pattern, ctx + " (kept across the pause)");
                else fill(host, b.address, b.size, b.pattern, ctx); // contents not kept: undefined
            }
        }
    }
}
