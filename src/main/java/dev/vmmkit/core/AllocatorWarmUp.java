package dev.vmmkit.core;

import dev.vmmkit.driver.VmmDriver;

/**
 * Runs the allocator's code as a program's first minutes run it, on a driver that backs nothing
 * ({@link dev.vmmkit.driver.DryDriver}), so that the JVM has loaded, linked and compiled it before
 * the program's own first large allocation: in the interpreter, that code costs hundreds of
 * microseconds more than the driver calls it makes. Each round makes a new manager and, on it, what
 * loading a model does (first backings of 1 GiB down to 64 MiB, one handle each), a small
 * malloc/free pair, cudaFree-style and stream frees, a same-size loop that alternates blocks while
 * frees wait for the device, a tag paused and resumed, and a close. After the rounds,
 * {@link #cycleATag} pauses and resumes one tag until its code is compiled, as a program that hands
 * its memory back every step (an RL loop's inference engine) would compile it only after hundreds
 * of its own steps.
 *
 * <p>It touches nothing outside the managers it makes: no real device, no shared state, so a
 * program cannot observe it (the tests check that its stats and handles stay its own).
 */
public final class AllocatorWarmUp {
    /**
     * Rounds enough for the JIT's first tier to compile the slow path: C1 compiles a method after
     * ~200 calls (more while its queue is long), and a round makes about 30 slow-path requests. On
     * an H100's 16 cores 30 rounds leave a first 1 GiB request 40 us of Java; on a loaded 2-core
     * host, whose compile queue is long, most slow-path methods are still uncompiled after them.
     * More only kept the warm-up running beside a program's first calls: 60 rounds, and 100 (94-125
     * ms, a first 1 GiB cudaMalloc 332 us against 289 with 30), were still running at the first
     * large request right after CUDA's initialisation on an H100 (docs/cold-path.md). A round's
     * own costs (a new manager, its first allocation, its close: about a millisecond once compiled)
     * dwarf its requests', so each round makes many.
     */
    public static final int ROUNDS = 30;

    /**
     * The first rounds' managers have a fence thread of their own, as a program's manager has (the
     * others synchronise on the calling thread, for no thread start a round). Without them, a
     * program's first cudaFree ran the fence's publish and wake-up, and the thread its loop, for
     * the first time (its upcall took 85-220 us on a 2-core host, where the runtime's own cudaFree
     * of 4 KiB takes about 1 us; docs/cold-path.md, "The first allocation").
     */
    static final int ROUNDS_WITH_FENCE_THREAD = 2;

    private static final long MIB = 1L << 20;
    private static final long[] FIRST_BACKINGS = {1024 * MIB, 256 * MIB, 64 * MIB + 4096};
    private static final String TAG = "vmmkit-warm-up";
    private static final long[] TAG_BLOCKS = {96 * MIB, 8 * MIB + 4096, 40 * MIB};
    /** More first backings per round, 4 to 50 MiB (648 MiB in all: the dry device has 4 GiB). */
    private static final int MORE_FIRST_BACKINGS = 24;

    /**
     * Pause and resume cycles of one discarded tag for {@link #cycleATag}. A round pauses a tag once,
     * far below the ~200 calls after which C1 compiles a method, so a program's first pauses and
     * resumes ran in the interpreter: on a dry driver (2-core host) a resume of a one-block tag took
     * 35-65 us of Java in its first 100 cycles, 10-26 after 200-300, 5-7 after 1,000 and 1.4-2.6
     * after 5,000, a pause about twice that (docs/memory-tags.md, "Memory tags: the Java of a pause,
     * compiled"). 1,000 cycles take 7-8 ms on an H200's host.
     */
    public static final int TAG_CYCLES = 1000;

    private AllocatorWarmUp() {
    }

    /**
     * Runs {@code rounds} rounds on {@code dryDriver} with {@code config}; stops early (returning the
     * rounds done) when {@code keepGoing} says so, or at the first failure, which it swallows: a
     * warm-up never decides anything.
     */
    public static int run(VmmDriver dryDriver, VmmConfig config, int rounds, java.util.function.BooleanSupplier keepGoing) {
        int done = 0;
        try {
            for (; done < rounds && keepGoing.getAsBoolean(); done++) oneRound(dryDriver, config, done < ROUNDS_WITH_FENCE_THREAD);
        } catch (RuntimeException e) {
            // A warm-up is worth nothing once it fails; the program's own calls report real problems.
        }
        return done;
    }

    /**
     * A tag whose contents are not kept, as a KV cache's: allocated in a region, paused, resumed and
     * freed. A program's first pause and resume otherwise ran this code in the interpreter (up to a
     * millisecond of Java in an 8 GiB pause on an H100).
     */
    private static void pauseAndResumeATag(VmmManager m) {
        long[] blocks = tagBlocks(m);
        m.pause(TAG);
        m.resume(TAG);
        for (long block : blocks) m.deallocate(block, 0);
    }

    /**
     * Pauses and resumes one discarded tag of a few blocks {@code cycles} times on a new manager over
     * {@code dryDriver}; stops early (returning the cycles done) when {@code keepGoing} says so, or
     * at the first failure, which it swallows.
     */
    public static int cycleATag(VmmDriver dryDriver, VmmConfig config, int cycles, java.util.function.BooleanSupplier keepGoing) {
        int done = 0;
        try (VmmManager m = VmmManager.withFenceOnCallingThread(dryDriver, config)) {
            long[] blocks = tagBlocks(m);
            for (; done < cycles && keepGoing.getAsBoolean(); done++) {
                m.pause(TAG);
                m.resume(TAG);
            }
            for (long block : blocks) m.deallocate(block, 0);
        } catch (RuntimeException e) {
            // As in run: a failed warm-up decides nothing.
        }
        return done;
    }

    /** Allocates the warm-up tag's blocks in a region of that tag, its contents not kept. */
    private static long[] tagBlocks(VmmManager m) {
        m.beginTagRegion(TAG, false);
        long[] blocks = new long[TAG_BLOCKS.length];
        try {
            for (int i = 0; i < blocks.length; i++) blocks[i] = m.allocate(TAG_BLOCKS[i], 0);
        } finally {
            m.endTagRegion();
        }
        return blocks;
    }

    private static void oneRound(VmmDriver driver, VmmConfig config, boolean fenceThread) {
        try (VmmManager m = fenceThread ? new VmmManager(driver, config) : VmmManager.withFenceOnCallingThread(driver, config)) {
            long small = m.allocate(4096, 0);
            if (!m.owns(small)) throw new IllegalStateException("warm-up: a block the manager does not own"); // the shim asks before each free
            m.deallocate(small, DeviceMemoryResource.DEVICE_WIDE_STREAM);
            long[] loaded = new long[FIRST_BACKINGS.length];
            for (int i = 0; i < loaded.length; i++) loaded[i] = m.allocate(FIRST_BACKINGS[i], 0);
            long[] more = new long[MORE_FIRST_BACKINGS];
            for (int i = 0; i < more.length; i++) more[i] = m.allocate((4 + 2L * i) * MIB + 4096L * (i % 3), 0);
            for (int i = 0; i < 4; i++) { // a same-size loop: cudaMalloc + cudaFree
                long p = m.allocate(64 * MIB, 0);
                m.deallocate(p, DeviceMemoryResource.DEVICE_WIDE_STREAM);
            }
            long onStream = m.allocate(3 * MIB, 7);
            m.deallocate(onStream, 7);
            m.deallocate(loaded[0], 0);
            m.deallocate(loaded[1], DeviceMemoryResource.DEVICE_WIDE_STREAM);
            long again = m.allocate(512 * MIB, 7);
            m.deallocate(again, 7);
            m.deallocate(loaded[2], 0);
            for (int i = 0; i < more.length; i++) m.deallocate(more[i], i % 2 == 0 ? 0 : DeviceMemoryResource.DEVICE_WIDE_STREAM);
            pauseAndResumeATag(m);
            m.stats();
        }
    }
}
