package dev.vmmkit.interpose;

import dev.vmmkit.core.AllocatorWarmUp;
import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.driver.DryDriver;
import dev.vmmkit.driver.cuda.CudaCallWarmUp;

import java.util.Map;

/**
 * When the shim has started Java (vmm mode), a daemon thread links every CUDA downcall
 * ({@link CudaCallWarmUp}) and runs the allocator's code on a dry driver ({@link AllocatorWarmUp}),
 * so that the program's first large allocation runs linked, compiled code. The shim's start waits
 * for it at most {@value #WAIT_MILLIS} ms ({@link #startAndWait}): the shim initialises CUDA on
 * the program's thread meanwhile (~200 ms on an H200, longer than the JVM's start plus this), so on
 * a GPU the wait costs nothing; whatever is left goes on in the background. {@code VMM_WARM_UP=0}
 * turns it off (to measure what it saves). It stops when the program exits.
 */
final class StartUpWarmUp {
    static final String SETTING = "VMM_WARM_UP";
    static final String THREAD_NAME = "vmmkit-warm-up";
    /** Pages of the dry device: the smallest granularity CUDA has. */
    private static final long DRY_PAGE_BYTES = 2L << 20;
    /** Small: a manager's page table spans twice the device, and each round makes one. */
    private static final long DRY_DEVICE_BYTES = 4L << 30;

    private static volatile boolean stopped;
    /** Set by the warm-up's thread: when it started and ended (0: not yet), and the rounds it ran. */
    private static volatile long startedAtNanos;
    private static volatile long endedAtNanos;
    private static volatile int roundsDone;

    private StartUpWarmUp() {
    }

    /** The longest the shim's start waits for the warm-up. */
    static final long WAIT_MILLIS = 50;

    /** Starts the warm-up unless {@value #SETTING} is 0, and waits for it at most {@value #WAIT_MILLIS} ms. */
    static void startAndWait(Map<String, String> env) {
        Thread thread = start(env);
        if (thread == null) return;
        try {
            thread.join(WAIT_MILLIS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Starts the thread unless {@value #SETTING} is 0; returns it (null when off). */
    static Thread start(Map<String, String> env) {
        if ("0".equals(env.getOrDefault(SETTING, "1").trim())) return null;
        boolean cuda = "cuda".equals(env.getOrDefault("VMM_DRIVER", "cuda").trim());
        VmmConfig config;
        try {
            config = VmmConfig.from(env).withPeakHintBytes(0);
        } catch (RuntimeException badSetting) {
            return null; // reported where the allocator is made
        }
        return Thread.ofPlatform().daemon().name(THREAD_NAME).priority(Thread.MIN_PRIORITY)
                .start(() -> {
                    startedAtNanos = System.nanoTime();
                    roundsDone = exercise(cuda, config);
                    endedAtNanos = System.nanoTime();
                });
    }

    /** True while the warm-up's thread runs: its work then shares the machine with the program's calls. */
    static boolean running() {
        return startedAtNanos != 0 && endedAtNanos == 0;
    }

    /** How the warm-up went, for {@code VMM_LOG=info} at exit; null when it never started. */
    static String summary() {
        long started = startedAtNanos, ended = endedAtNanos;
        if (started == 0) return null;
        if (ended == 0) return "start-up warm-up: still running at exit";
        return String.format(java.util.Locale.ROOT, "start-up warm-up: %d rounds in %.1f ms", roundsDone, (ended - started) / 1e6);
    }

    /** The warm-up itself, on the calling thread (the AOT cache's training run calls it too); returns the allocator's rounds run. */
    static int exercise(boolean cuda, VmmConfig config) {
        if (cuda) CudaCallWarmUp.run();
        return AllocatorWarmUp.run(new DryDriver(DRY_PAGE_BYTES, DRY_DEVICE_BYTES), config, AllocatorWarmUp.ROUNDS, () -> !stopped);
    }

    /** Ends a warm-up still running after its current round (the program is exiting). */
    static void stop() {
        stopped = true;
    }
}
