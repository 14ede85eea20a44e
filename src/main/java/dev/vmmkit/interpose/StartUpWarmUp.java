package dev.vmmkit.interpose;

import dev.vmmkit.core.AllocatorWarmUp;
import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.driver.DryDriver;
import dev.vmmkit.driver.cuda.CudaCallWarmUp;

import java.lang.foreign.MemorySegment;
import java.util.Map;

/**
 * When the shim has started Java (vmm mode), two daemon threads make the program's first large
 * allocation run linked, compiled code: one links every CUDA downcall ({@link CudaCallWarmUp}), the
 * other runs the allocator's code on a dry driver ({@link AllocatorWarmUp}), then the shim's tag
 * calls ({@link TagCallWarmUp}) and, last, a tag's pause and resume until they are compiled
 * ({@link AllocatorWarmUp#cycleATag}: a program's first pause comes long after its first
 * allocation, so these may still run at that allocation). They run side by side
 * because the program's first allocation may come right after CUDA's initialisation (~200 ms): one
 * thread doing both was still running then in 14 of 15 processes on an H100, beside the program's
 * call. A start made at the program's first allocation waits for them at most {@value #WAIT_MILLIS}
 * ms ({@link #startAndWait}): the shim initialises CUDA on the program's thread meanwhile, so on a
 * GPU the wait costs nothing. A start made early (when the program's CUDA runtime initialises) waits
 * for nothing: the program runs beside it and may allocate at any moment. Whatever is left goes on
 * in the background. {@code VMM_WARM_UP=0} turns it off (to measure what it saves). It stops when
 * the program exits.
 */
final class StartUpWarmUp {
    static final String SETTING = "VMM_WARM_UP";
    static final String THREAD_NAME = "vmmkit-warm-up";
    static final String CUDA_THREAD_NAME = "vmmkit-warm-up-cuda";
    /** Pages of the dry device: the smallest granularity CUDA has. */
    private static final long DRY_PAGE_BYTES = 2L << 20;
    /** Small: a manager's page table spans twice the device, and each round makes one. */
    private static final long DRY_DEVICE_BYTES = 4L << 30;
    /**
     * The allocator's rounds: {@link AllocatorWarmUp#ROUNDS}, or the system property
     * {@code vmmkit.warmUp.rounds} (a measurement switch, as the fence's are).
     */
    static final int ROUNDS = Math.max(0, Integer.getInteger("vmmkit.warmUp.rounds", AllocatorWarmUp.ROUNDS));
    /** The tag's pause and resume cycles after the rounds: {@link AllocatorWarmUp#TAG_CYCLES}, or {@code vmmkit.warmUp.tagCycles}. */
    static final int TAG_CYCLES = Math.max(0, Integer.getInteger("vmmkit.warmUp.tagCycles", AllocatorWarmUp.TAG_CYCLES));

    private static volatile boolean stopped;
    /** Set by the warm-up's threads: when they started and ended (0: not yet), and the allocator's rounds. */
    private static volatile long startedAtNanos;
    private static volatile long allocatorEndedAtNanos;
    private static volatile long cudaEndedAtNanos;
    /** When the allocator's thread went on to the tag's cycles (0: not yet). */
    private static volatile long roundsEndedAtNanos;
    private static volatile int roundsDone;
    private static volatile int tagCyclesDone;

    private StartUpWarmUp() {
    }

    /** The longest a start made at the program's first allocation waits for the warm-up. */
    static final long WAIT_MILLIS = 50;

    /**
     * Starts the warm-up unless {@value #SETTING} is 0, and waits for it at most {@code waitMillis}
     * ms (0: not at all); the allocator's thread then calls the shim's memory-tag entry points in
     * {@code table} ({@link TagCallWarmUp}).
     */
    static void startAndWait(Map<String, String> env, MemorySegment table, long waitMillis) {
        Thread allocator = start(env, () -> TagCallWarmUp.run(table, TagCallWarmUp.ROUNDS));
        if (allocator == null || waitMillis <= 0) return;
        try {
            allocator.join(waitMillis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Starts the threads unless {@value #SETTING} is 0; returns the allocator's (null when off), which runs {@code after} last. */
    static Thread start(Map<String, String> env, Runnable after) {
        if ("0".equals(env.getOrDefault(SETTING, "1").trim())) return null;
        boolean cuda = "cuda".equals(env.getOrDefault("VMM_DRIVER", "cuda").trim());
        VmmConfig config;
        try {
            config = VmmConfig.from(env).withPeakHintBytes(0);
        } catch (RuntimeException badSetting) {
            return null; // reported where the allocator is made
        }
        allocatorEndedAtNanos = 0; // a second start (a host JVM's, a test's) is timed afresh
        cudaEndedAtNanos = 0;
        roundsEndedAtNanos = 0;
        startedAtNanos = System.nanoTime();
        if (cuda) {
            daemon(CUDA_THREAD_NAME, () -> {
                CudaCallWarmUp.run();
                cudaEndedAtNanos = System.nanoTime();
            });
        } else {
            cudaEndedAtNanos = startedAtNanos;
        }
        return daemon(THREAD_NAME, () -> {
            roundsDone = exerciseAllocator(config);
            if (!stopped) after.run();
            roundsEndedAtNanos = System.nanoTime();
            tagCyclesDone = exerciseTagCycles(config); // last, as the class comment says
            allocatorEndedAtNanos = System.nanoTime();
        });
    }

    private static Thread daemon(String name, Runnable work) {
        return Thread.ofPlatform().daemon().name(name).priority(Thread.MIN_PRIORITY).start(work);
    }

    /** True while a warm-up thread runs: its work then shares the machine with the program's calls. */
    static boolean running() {
        return startedAtNanos != 0 && (allocatorEndedAtNanos == 0 || cudaEndedAtNanos == 0);
    }

    /** How the warm-up went, for {@code VMM_LOG=info} at exit; null when it never started. */
    static String summary() {
        long started = startedAtNanos;
        if (started == 0) return null;
        long roundsEnded = roundsEndedAtNanos;
        return "start-up warm-up: allocator " + (roundsEnded == 0 ? "still running at exit"
                : roundsDone + " rounds in " + StepTimes.millis(roundsEnded - started)
                + (allocatorEndedAtNanos == 0 ? ", a tag's cycles still running at exit"
                        : ", a tag " + tagCyclesDone + " cycles in " + StepTimes.millis(allocatorEndedAtNanos - roundsEnded)))
                + ", CUDA downcalls " + (cudaEndedAtNanos == 0 ? "still running at exit" : "linked in " + StepTimes.millis(cudaEndedAtNanos - started));
    }

    /** The whole warm-up on the calling thread (the AOT cache's training run calls it); returns the allocator's rounds run. */
    static int exercise(boolean cuda, VmmConfig config) {
        if (cuda) CudaCallWarmUp.run();
        int rounds = exerciseAllocator(config);
        exerciseTagCycles(config);
        return rounds;
    }

    private static int exerciseAllocator(VmmConfig config) {
        return AllocatorWarmUp.run(new DryDriver(DRY_PAGE_BYTES, DRY_DEVICE_BYTES), config, ROUNDS, () -> !stopped);
    }

    private static int exerciseTagCycles(VmmConfig config) {
        return AllocatorWarmUp.cycleATag(new DryDriver(DRY_PAGE_BYTES, DRY_DEVICE_BYTES), config, TAG_CYCLES, () -> !stopped);
    }

    /** Ends a warm-up still running after its current round (the program is exiting). */
    static void stop() {
        stopped = true;
    }
}
