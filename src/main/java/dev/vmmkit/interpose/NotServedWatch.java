package dev.vmmkit.interpose;

import dev.vmmkit.core.ManagedMemoryResource;
import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.OtherProcesses;
import dev.vmmkit.driver.VmmDriver;

import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.IntFunction;

/**
 * Samples, while the program runs, how much device memory is in use beyond what vmmkit holds, on
 * each device vmmkit serves: a daemon thread per device (a driver answers for the context current
 * on the calling thread) reads the driver's free memory (cuMemGetInfo) and the allocator's reserved
 * bytes every {@link #PERIOD_MS} ms and keeps the highest difference, and takes one more sample
 * when stopped at exit. Where the difference could be worth a line the watch also asks what other
 * processes on the device hold (NVML, on CUDA) and leaves that out, so a job sharing the GPU is not
 * reported as memory vmmkit did not serve; the peak says how many of them could not be told from
 * this program. A figure worth a line counts once two samples in a row read at least it (at exit,
 * once it holds for a moment). A framework's pool is persistent, so a period this long does not miss it,
 * and the program's calls never wait for a sample. Those threads are started by one of the watch's
 * own, made at vmmkit's start ({@link #startEarly}), not by the allocation that opened the device: a
 * thread's start took 1.6-2.4 ms inside a program's first allocation on an H200.
 */
final class NotServedWatch {
    /**
     * The sampling period; the system property {@code vmmkit.notServed.periodMs} sets it, and 0
     * keeps only the sample at exit (so that {@code scripts/gpu/pause-resume.sh} can measure whether
     * the samples' cuMemGetInfo slows the program's own driver calls).
     */
    static final long PERIOD_MS = Math.max(0, Long.getLong("vmmkit.notServed.periodMs", 100));
    private static final long STOP_WAIT_MS = 2000;
    /**
     * Other processes are asked about only when the memory beyond vmmkit's could be worth a line:
     * NVML's first use takes tens of milliseconds and calls into the kernel driver, which should not
     * run beside a program's first allocations when nothing else uses the device.
     */
    static final long ASK_OTHERS_FROM_BYTES = NotServedMemory.SIGNIFICANT_BYTES;
    /** A figure beyond vmmkit's and other processes' that may be worth a line at exit. */
    private static final long WORTH_A_LINE_BYTES = NotServedMemory.SIGNIFICANT_BYTES;
    private static final long NONE_WORTH_A_LINE = Long.MIN_VALUE;
    /** Reads at exit of a figure worth a line that the sample before did not read: 8 x 25 ms, twice the release measured. */
    private static final int EXIT_REREADS = 8;
    private static final long EXIT_REREAD_MS = 25;

    /**
     * One device's figures: the highest outside vmmkit, the device memory in use then, and how many
     * other processes used the device then whose memory could not be told from this program's.
     */
    record Peak(long outsideBytes, long usedBytes, int unattributedProcesses) {
    }

    private final class Device {
        final int ordinal;
        final IntFunction<VmmDriver.MemoryInfo> memory;
        final IntFunction<OtherProcesses> others;
        final ManagedMemoryResource allocator;
        long outside = Long.MIN_VALUE, used; // guarded by this
        int unattributed; // guarded by this
        /** Whether the sample before read a figure worth asking NVML about (guarded by this). */
        boolean largeBefore;
        /** The figure the sample before read beyond vmmkit's and other processes', when worth a line (guarded by this). */
        long lineWorthyBefore = NONE_WORTH_A_LINE;
        volatile Thread sampler;

        Device(int ordinal, IntFunction<VmmDriver.MemoryInfo> memory, IntFunction<OtherProcesses> others,
               ManagedMemoryResource allocator) {
            this.ordinal = ordinal;
            this.memory = memory;
            this.others = others;
            this.allocator = allocator;
        }

        void startSampler() {
            if (!stopped) sampler = Thread.ofPlatform().daemon().name("vmmkit-not-served-" + ordinal).start(this::sampleUntilStopped);
        }

        void sampleUntilStopped() {
            while (!stopped) {
                sample();
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(periodMs));
            }
            sample();
        }

        /** One sample; the whole of it under this device's lock, whose state includes the sample before. */
        synchronized void sample() {
            try {
                // vmmkit's figure is read on both sides of the driver's and the larger kept: a handle the
                // driver has made and vmmkit not yet counted is then in neither reading, not in one alone.
                long reservedBefore = allocator.reservedBytes();
                long inUse = inUse();
                long reserved = Math.max(reservedBefore, allocator.reservedBytes());
                boolean large = inUse - reserved >= ASK_OTHERS_FROM_BYTES;
                // NVML is asked from the second such reading in a row (or at exit): while vmmkit
                // creates a large handle the driver counts it a moment before vmmkit does, and asking
                // NVML beside a program's first large allocation would slow it.
                OtherProcesses elsewhere = large && (largeBefore || stopped) ? others.apply(ordinal) : OtherProcesses.NONE;
                largeBefore = large;
                long beyond = inUse - elsewhere.bytes() - reserved;
                if (beyond < WORTH_A_LINE_BYTES) {
                    keep(beyond, reserved, elsewhere.unattributed());
                    lineWorthyBefore = NONE_WORTH_A_LINE;
                    return;
                }
                // A figure worth a line counts once two samples in a row read at least it: a process
                // that has just ended is gone from NVML's list while the driver still counts its
                // memory, for up to about 100 ms (an H200: a torch.multiprocessing child's 0.6 GiB).
                if (stopped && beyond > lineWorthyBefore) beyond = lowestAtExit(beyond, reserved);
                else if (!stopped && lineWorthyBefore == NONE_WORTH_A_LINE) {
                    lineWorthyBefore = beyond;
                    return;
                }
                long counted = stopped ? beyond : Math.min(beyond, lineWorthyBefore);
                lineWorthyBefore = beyond;
                keep(counted, reserved, elsewhere.unattributed());
            } catch (DriverException e) {
                // At exit CUDA may have shut down before vmmkit's last sample: the samples taken stand.
                if (e.result() != CudaResult.DEINITIALIZED) warnCannotRead(e);
            } catch (Throwable e) {
                warnCannotRead(e);
            }
        }

        /**
         * The sample at exit read a figure worth a line that the sample before did not: reads again
         * for a moment (a process that ended just before this one may still be counted) and returns
         * the lowest figure read.
         */
        private long lowestAtExit(long first, long reserved) {
            long lowest = first;
            for (int i = 0; i < EXIT_REREADS && lowest >= WORTH_A_LINE_BYTES; i++) {
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(EXIT_REREAD_MS));
                long inUse = inUse();
                lowest = Math.min(lowest, inUse - others.apply(ordinal).bytes() - reserved);
            }
            return lowest;
        }

        private long inUse() {
            VmmDriver.MemoryInfo info = memory.apply(ordinal);
            return info.totalBytes() - info.freeBytes();
        }

        /** Keeps {@code beyond} when it is the highest so far, with the memory in use it stands for. */
        private void keep(long beyond, long reserved, int unattributedThen) {
            if (beyond <= outside) return;
            outside = beyond;
            used = beyond + reserved;
            unattributed = unattributedThen;
        }

        private void warnCannotRead(Throwable e) {
            InterposeLog.warnOnce("not-served", "cannot read device " + ordinal + "'s free memory", e);
        }

        synchronized Peak peak() {
            return outside == Long.MIN_VALUE ? null : new Peak(Math.max(0, outside), used, unattributed);
        }
    }

    private final long periodMs;
    private final ConcurrentHashMap<Integer, Device> devices = new ConcurrentHashMap<>();
    private volatile boolean stopped;
    /** Starts each device's sampler thread, so that the thread watching a device does not. */
    private final ThreadPoolExecutor starter = new ThreadPoolExecutor(1, 1, 0, TimeUnit.SECONDS, new LinkedBlockingQueue<>(),
            work -> Thread.ofPlatform().daemon().name("vmmkit-not-served-starter").unstarted(work));

    /** A watch that samples every {@link #PERIOD_MS} ms. */
    NotServedWatch() {
        this(PERIOD_MS);
    }

    /** A watch that samples every {@code periodMs} ms; 0: only when asked ({@link #sampleNow}) and at exit. */
    NotServedWatch(long periodMs) {
        this.periodMs = periodMs;
    }

    /** Starts the thread that starts the samplers now (at vmmkit's start), rather than at the first watch. */
    void startEarly() {
        if (periodMs > 0 && !stopped) starter.prestartCoreThread();
    }

    /**
     * Watches {@code device}: {@code memory} reads the driver's free and total bytes, {@code others}
     * what other processes hold on the device, {@code allocator} holds vmmkit's.
     */
    void watch(int device, IntFunction<VmmDriver.MemoryInfo> memory, IntFunction<OtherProcesses> others,
               ManagedMemoryResource allocator) {
        Device d = new Device(device, memory, others, allocator);
        if (devices.putIfAbsent(device, d) != null || stopped || periodMs == 0) return;
        try {
            starter.execute(d::startSampler);
        } catch (RejectedExecutionException stoppedMeanwhile) {
            // stop() takes the last sample of a device without a sampler
        }
    }

    /** Takes one sample of {@code device} on the calling thread (tests: no waiting on the sampler). */
    void sampleNow(int device) {
        Device d = devices.get(device);
        if (d != null) d.sample();
    }

    /** Stops sampling; each device's thread takes one last sample first. */
    void stop() {
        stopped = true;
        starter.shutdown();
        for (Device d : devices.values()) {
            Thread sampler = d.sampler;
            if (sampler == null) {
                d.sample(); // no sampling thread (period 0, or not started yet): the sample at exit only
                continue;
            }
            LockSupport.unpark(sampler);
            try {
                sampler.join(STOP_WAIT_MS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    /** The figures of {@code device}, or null when it was not watched or never sampled. */
    Peak peak(int device) {
        Device d = devices.get(device);
        return d == null ? null : d.peak();
    }

    /** Whether devices are sampled in the background, not only at exit. */
    boolean samplesWhileRunning() {
        return periodMs > 0;
    }

    List<Integer> watchedDevices() {
        return devices.keySet().stream().sorted().toList();
    }
}
