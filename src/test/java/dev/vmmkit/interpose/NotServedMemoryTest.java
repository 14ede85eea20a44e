package dev.vmmkit.interpose;

import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.DriverKind;
import dev.vmmkit.driver.OtherProcesses;
import dev.vmmkit.driver.Drivers;
import dev.vmmkit.driver.VmmDriver;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The line vmmkit prints at exit when a program's device memory did not come from it, and the sampling behind it. */
class NotServedMemoryTest {
    private static final long GIB = 1L << 30;
    private static final String CUDA_ASYNC = "XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async and XLA_PYTHON_CLIENT_PREALLOCATE=false";
    private static final String JAX_MAPS = "7f00-7f01 r-xp 0 0:0 0 /usr/lib/python3/site-packages/jaxlib/xla_extension.so\n";

    /** The watch's peak with no other process on the device. */
    private static NotServedWatch.Peak peak(long outsideBytes, long usedBytes) {
        return new NotServedWatch.Peak(outsideBytes, usedBytes, 0);
    }

    @Test
    void cudasOwnMemoryIsNotWorthALine() {
        // A context with library workspaces: under a gibibyte, or a small share of a large run.
        assertEquals(List.of(), NotServedMemory.lines(0, peak(700L << 20, 900L << 20), NotServedMemory.Clues.NONE));
        assertEquals(List.of(), NotServedMemory.lines(0, peak(2 * GIB, 70 * GIB), NotServedMemory.Clues.NONE));
    }

    @Test
    void aLargeShareFromElsewhereIsOneLineNamingTheFiguresAndTheKnownCauses() {
        List<String> plain = NotServedMemory.lines(1, peak(20 * GIB, 30 * GIB), NotServedMemory.Clues.NONE);
        assertEquals(1, plain.size(), plain::toString);
        assertTrue(plain.getFirst().startsWith("vmmkit: device 1: 20.0 GiB of the 30.0 GiB"), plain::toString);
        assertTrue(plain.getFirst().contains("cuMemCreate"), plain::toString);

        NotServedMemory.Clues jax = NotServedMemory.Clues.of(Map.of(), JAX_MAPS);
        List<String> bfc = NotServedMemory.lines(0, peak(60 * GIB, 62 * GIB), jax);
        assertEquals(1, bfc.size(), bfc::toString);
        assertTrue(bfc.getFirst().contains("preallocates") && bfc.getFirst().contains(CUDA_ASYNC), bfc::toString);
        NotServedMemory.Clues noPrealloc = NotServedMemory.Clues.of(Map.of("XLA_PYTHON_CLIENT_PREALLOCATE", "false"), JAX_MAPS);
        assertTrue(!NotServedMemory.lines(0, peak(60 * GIB, 62 * GIB), noPrealloc).getFirst().contains("preallocates"));
        // Current JAX's platform allocator makes each buffer with cuMemCreate: the line names it.
        NotServedMemory.Clues platform = NotServedMemory.Clues.of(Map.of("XLA_PYTHON_CLIENT_ALLOCATOR", "platform"), JAX_MAPS);
        List<String> own = NotServedMemory.lines(0, peak(12 * GIB, 13 * GIB), platform);
        assertTrue(own.getFirst().contains("cuMemCreate") && own.getFirst().contains(CUDA_ASYNC), own::toString);
    }

    @Test
    void jaxsAllocatorIsNamedUnlessVmmkitServesEachBuffer() {
        NotServedMemory.Clues bfc = NotServedMemory.Clues.of(Map.of("XLA_PYTHON_CLIENT_PREALLOCATE", "false"), JAX_MAPS);
        List<String> lines = NotServedMemory.lines(0, peak(300L << 20, 40 * GIB), bfc);
        assertEquals(1, lines.size(), lines::toString);
        assertTrue(lines.getFirst().contains(CUDA_ASYNC), lines::toString);
        // cuda_async with preallocation: served, but one buffer of most of the device comes first.
        NotServedMemory.Clues preallocating = NotServedMemory.Clues.of(Map.of("XLA_PYTHON_CLIENT_ALLOCATOR", "cuda_async"), JAX_MAPS);
        assertTrue(NotServedMemory.lines(0, peak(300L << 20, 40 * GIB), preallocating).getFirst().contains("PREALLOCATE=false"));
        NotServedMemory.Clues served = NotServedMemory.Clues.of(
                Map.of("XLA_PYTHON_CLIENT_ALLOCATOR", "cuda_async", "XLA_PYTHON_CLIENT_PREALLOCATE", "false"), JAX_MAPS);
        assertEquals(List.of(), NotServedMemory.lines(0, peak(300L << 20, 40 * GIB), served));
        // Memory from elsewhere in a program whose JAX buffers vmmkit serves: the general line, no JAX advice.
        List<String> elsewhere = NotServedMemory.lines(0, peak(20 * GIB, 30 * GIB), served);
        assertTrue(!elsewhere.getFirst().contains("JAX") && elsewhere.getFirst().contains("cuMemCreate"), elsewhere::toString);
    }

    @Test
    void pytorchsExpandableSegmentsAreNamedWhenTheyHoldTheMemory() {
        String torchMaps = "7f00-7f01 r-xp 0 0:0 0 /opt/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so\n";
        NotServedMemory.Clues expandable = NotServedMemory.Clues.of(
                Map.of("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128,expandable_segments:True"), torchMaps);
        List<String> lines = NotServedMemory.lines(0, peak(20 * GIB, 21 * GIB), expandable);
        assertTrue(lines.getFirst().contains("expandable segments") && lines.getFirst().contains("PYTORCH_NO_CUDA_MEMORY_CACHING=1"),
                lines::toString);
        assertTrue(NotServedMemory.Clues.of(Map.of("PYTORCH_ALLOC_CONF", "expandable_segments:true"), torchMaps)
                .torchExpandableSegments());
        // Off, or set without PyTorch loaded: no such clue.
        assertTrue(!NotServedMemory.Clues.of(Map.of("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:False"), torchMaps)
                .torchExpandableSegments());
        assertTrue(!NotServedMemory.Clues.of(Map.of("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"), "")
                .torchExpandableSegments());
        // Nothing significant from elsewhere: nothing said.
        assertEquals(List.of(), NotServedMemory.lines(0, peak(300L << 20, 21 * GIB), expandable));
        // Every segment expandable: vmmkit never opened the device, and still says why.
        List<String> none = NotServedMemory.linesWithoutDevices(expandable);
        assertTrue(none.getFirst().startsWith("vmmkit: no device memory came from vmmkit; PyTorch's expandable segments"),
                none::toString);
    }

    /**
     * NCCL makes its buffers with cuMemCreate by default: a rank of a distributed program (torchrun's
     * WORLD_SIZE, or NCCL's shared memory mapped) or a process on several devices hears so, with the switch that gives them to
     * vmmkit (on two H200s, DDP's losses were the same with it under vmmkit). PyTorch loads NCCL in
     * every CUDA process, so the library alone names nothing, nor does NCCL told to use cudaMalloc.
     */
    @Test
    void ncclsOwnBuffersAreNamedInARankOfADistributedProgram() {
        String ncclMaps = "7f00-7f10 r-xp 0 08:01 1 /usr/lib/python3/site-packages/nvidia/nccl/lib/libnccl.so.2\n";
        String sharedSegment = "7f20-7f30 rw-s 0 00:1a 2 /dev/shm/nccl-Ab12Cd\n";
        NotServedWatch.Peak ddp = peak(3 * GIB / 2, 8 * GIB / 5);
        List<String> rank = NotServedMemory.lines(1, ddp, NotServedMemory.Clues.of(Map.of("WORLD_SIZE", "2"), ncclMaps));
        assertEquals(1, rank.size(), rank::toString);
        assertTrue(rank.getFirst().contains("NCCL_CUMEM_ENABLE=0") && !rank.getFirst().contains("managed memory"), rank::toString);
        assertTrue(NotServedMemory.lines(0, ddp, NotServedMemory.Clues.of(Map.of(), ncclMaps + sharedSegment))
                .getFirst().contains("NCCL_CUMEM_ENABLE=0"));
        assertTrue(NotServedMemory.lines(0, ddp, NotServedMemory.Clues.of(Map.of(), ncclMaps, 2)) // one process, two GPUs (JAX's pmap)
                .getFirst().contains("NCCL_CUMEM_ENABLE=0"));
        for (NotServedMemory.Clues none : List.of(NotServedMemory.Clues.of(Map.of(), ncclMaps),
                NotServedMemory.Clues.of(Map.of("WORLD_SIZE", "1"), ncclMaps),
                NotServedMemory.Clues.of(Map.of("WORLD_SIZE", "two"), ncclMaps),
                NotServedMemory.Clues.of(Map.of("WORLD_SIZE", "2", "NCCL_CUMEM_ENABLE", "0"), ncclMaps),
                NotServedMemory.Clues.of(Map.of("WORLD_SIZE", "2"), ""))) {
            List<String> lines = NotServedMemory.lines(0, ddp, none);
            assertTrue(lines.getFirst().contains("calls vmmkit does not serve") && !lines.getFirst().contains("NCCL"), lines::toString);
        }
        assertEquals(List.of(), NotServedMemory.linesWithoutDevices(NotServedMemory.Clues.of(Map.of("WORLD_SIZE", "2"), ncclMaps)),
                "NCCL's buffers alone do not keep a program's memory from vmmkit");
    }

    @Test
    void aProgramThatNeverOpenedTheDeviceHearsNothingUnlessAClueExplainsIt() {
        assertEquals(List.of(), NotServedMemory.linesWithoutDevices(NotServedMemory.Clues.NONE));
        NotServedMemory.Clues served = NotServedMemory.Clues.of(
                Map.of("XLA_PYTHON_CLIENT_ALLOCATOR", "cuda_async", "XLA_PYTHON_CLIENT_PREALLOCATE", "false"), JAX_MAPS);
        assertEquals(List.of(), NotServedMemory.linesWithoutDevices(served));
        NotServedMemory.Clues platform = NotServedMemory.Clues.of(Map.of("XLA_PYTHON_CLIENT_ALLOCATOR", "platform"), JAX_MAPS);
        assertTrue(NotServedMemory.linesWithoutDevices(platform).getFirst().contains(CUDA_ASYNC));
    }

    /**
     * The watch over the host emulation: a "device" whose free memory also shrinks by what another
     * allocator took. The highest difference is kept, and what vmmkit itself maps never counts.
     */
    @Test
    void theWatchKeepsTheHighestMemoryInUseBeyondVmmkitsOwn() {
        try (VmmDriver driver = Drivers.open(DriverKind.HOST, 0, 256L << 20);
             VmmManager manager = new VmmManager(driver, VmmConfig.DEFAULTS)) {
            AtomicLong elsewhere = new AtomicLong();
            NotServedWatch watch = sampledWhenAsked(manager, () -> {
                VmmDriver.MemoryInfo info = driver.memoryInfo();
                return new VmmDriver.MemoryInfo(info.freeBytes() - elsewhere.get(), info.totalBytes());
            });
            long a = manager.allocate(64L << 20, 0); // vmmkit's own: not counted
            elsewhere.set(100L << 20);
            watch.sampleNow(0);
            elsewhere.set(10L << 20);             // the other allocator gave some back: the peak stays
            manager.deallocate(a, 0);
            watch.stop();
            NotServedWatch.Peak peak = watch.peak(0);
            assertEquals(100L << 20, peak.outsideBytes(), peak::toString);
            assertTrue(peak.usedBytes() >= peak.outsideBytes(), peak::toString);
            assertNull(watch.peak(1));
        }
    }

    /** A watch of device 0 of {@code manager} with no other process on it, sampled only when the test asks. */
    private static NotServedWatch sampledWhenAsked(VmmManager manager, Supplier<VmmDriver.MemoryInfo> memory) {
        NotServedWatch watch = new NotServedWatch(0);
        watch.watch(0, device -> memory.get(), device -> OtherProcesses.NONE, manager);
        return watch;
    }

    /**
     * A handle vmmkit makes while a sample reads the figures (the driver counts it a moment before
     * vmmkit does) is not memory vmmkit failed to serve.
     */
    @Test
    void aHandleMadeWhileASampleReadsIsNotCountedOutsideVmmkit() {
        try (VmmDriver driver = Drivers.open(DriverKind.HOST, 0, 256L << 20);
             VmmManager manager = new VmmManager(driver, VmmConfig.DEFAULTS)) {
            AtomicLong made = new AtomicLong();
            NotServedWatch watch = sampledWhenAsked(manager, () -> {
                // vmmkit makes a 64 MiB handle after the sample read its figure, before the driver's is read
                if (made.get() == 0) made.set(manager.allocate(64L << 20, 0));
                return driver.memoryInfo();
            });
            watch.sampleNow(0);
            watch.stop();
            NotServedWatch.Peak peak = watch.peak(0);
            assertTrue(peak.outsideBytes() <= 0, peak::toString);
            manager.deallocate(made.get(), 0);
        }
    }

    /**
     * Another job on the same device (NVML lists it beside this process): its memory is the
     * device's figure but not this program's, so it is left out and nothing is said; where NVML's
     * process ids cannot be matched to this process, the line says the memory may be the other
     * processes'.
     */
    @Test
    void anotherProcessOnTheDeviceIsNotMemoryVmmkitFailedToServe() {
        try (VmmDriver driver = Drivers.open(DriverKind.HOST, 0, 256L << 20);
             VmmManager manager = new VmmManager(driver, VmmConfig.DEFAULTS)) {
            AtomicLong otherJob = new AtomicLong(100L << 20);
            AtomicReference<OtherProcesses> others = new AtomicReference<>(new OtherProcesses(otherJob.get(), 0));
            AtomicLong asked = new AtomicLong();
            NotServedWatch watch = new NotServedWatch(0); // samples only when the test asks
            watch.watch(0, device -> {
                VmmDriver.MemoryInfo info = driver.memoryInfo(); // a larger device, of which the other job holds part
                return new VmmDriver.MemoryInfo(info.freeBytes(), info.totalBytes() + otherJob.get());
            }, device -> {
                asked.incrementAndGet();
                return others.get();
            }, manager);
            long a = manager.allocate(64L << 20, 0);
            watch.sampleNow(0); // 100 MiB beyond vmmkit's is not worth a line: NVML is not asked
            assertEquals(0, asked.get());
            assertEquals(100L << 20, watch.peak(0).outsideBytes());

            otherJob.set(3 * GIB);
            others.set(new OtherProcesses(3 * GIB, 0));
            watch.sampleNow(0); // a figure worth a line, once: it may be a create in flight
            assertEquals(0, asked.get());
            assertEquals(100L << 20, watch.peak(0).outsideBytes());
            watch.sampleNow(0); // twice in a row: NVML is asked
            assertEquals(1, asked.get());
            assertEquals(100L << 20, watch.peak(0).outsideBytes(), watch.peak(0)::toString);

            others.set(new OtherProcesses(0, 1)); // the same job, listed under a process id this process cannot match
            watch.sampleNow(0);
            manager.deallocate(a, 0);
            watch.stop();
            NotServedWatch.Peak peak = watch.peak(0);
            assertEquals(3 * GIB, peak.outsideBytes(), peak::toString);
            assertEquals(1, peak.unattributedProcesses());
        }
        List<String> shared = NotServedMemory.lines(0, new NotServedWatch.Peak(20 * GIB, 30 * GIB, 2), NotServedMemory.Clues.NONE);
        assertEquals(1, shared.size(), shared::toString);
        assertTrue(shared.getFirst().contains("2 other processes used the device"), shared::toString);
        assertTrue(!shared.getFirst().contains("cuMemCreate"), shared::toString);
        // A cause this process's own clues name still comes first.
        List<String> jax = NotServedMemory.lines(0, new NotServedWatch.Peak(60 * GIB, 62 * GIB, 1),
                NotServedMemory.Clues.of(Map.of(), JAX_MAPS));
        assertTrue(jax.getFirst().contains("preallocates") && !jax.getFirst().contains("other process"), jax::toString);
    }

    /**
     * The driver counts a handle being created a moment before vmmkit does: one sample that reads a
     * large figure beyond vmmkit's is not kept, two in a row are, and so is one at exit that holds.
     */
    @Test
    void aLargeFigureCountsWhenTheNextSampleOrTheLastReadsOneToo() {
        try (VmmDriver driver = Drivers.open(DriverKind.HOST, 0, 256L << 20);
             VmmManager manager = new VmmManager(driver, VmmConfig.DEFAULTS)) {
            AtomicLong inFlight = new AtomicLong(2 * GIB);
            NotServedWatch watch = new NotServedWatch(0); // samples only when the test asks
            watch.watch(0, device -> {
                VmmDriver.MemoryInfo info = driver.memoryInfo();
                return new VmmDriver.MemoryInfo(info.freeBytes(), info.totalBytes() + inFlight.get());
            }, device -> OtherProcesses.NONE, manager);
            watch.sampleNow(0);
            inFlight.set(0);      // the create returned, and vmmkit counts it
            watch.sampleNow(0);
            assertEquals(0, watch.peak(0).outsideBytes(), watch.peak(0)::toString);

            inFlight.set(2 * GIB); // a pool of the program's own
            watch.sampleNow(0);
            watch.sampleNow(0);
            assertEquals(2 * GIB, watch.peak(0).outsideBytes());
        }
        try (VmmDriver driver = Drivers.open(DriverKind.HOST, 0, 256L << 20);
             VmmManager manager = new VmmManager(driver, VmmConfig.DEFAULTS)) {
            NotServedWatch watch = new NotServedWatch(0); // samples only when the test asks
            watch.watch(0, device -> {
                VmmDriver.MemoryInfo info = driver.memoryInfo();
                return new VmmDriver.MemoryInfo(info.freeBytes(), info.totalBytes() + 3 * GIB);
            }, device -> OtherProcesses.NONE, manager);
            watch.stop();          // the sample at exit has no next one to wait for
            assertEquals(3 * GIB, watch.peak(0).outsideBytes());
        }
    }

    /**
     * A child process that has just ended is gone from NVML's list while the driver still counts its
     * memory for a moment (seen on an H200 after a torch.multiprocessing child): that one reading is
     * not memory vmmkit failed to serve, whether it comes between two samples or at exit.
     */
    @Test
    void aProcessThatHasJustEndedIsNotCountedWhileTheDriverReleasesItsMemory() {
        try (VmmDriver driver = Drivers.open(DriverKind.HOST, 0, 256L << 20);
             VmmManager manager = new VmmManager(driver, VmmConfig.DEFAULTS)) {
            long context = 600L << 20; // CUDA's own memory in this process: counted, not worth a line
            AtomicLong child = new AtomicLong(700L << 20);
            AtomicBoolean listed = new AtomicBoolean(true);
            NotServedWatch watch = new NotServedWatch(0); // samples only when the test asks
            watch.watch(0, device -> {
                VmmDriver.MemoryInfo info = driver.memoryInfo();
                return new VmmDriver.MemoryInfo(info.freeBytes(), info.totalBytes() + context + child.get());
            }, device -> listed.get() ? new OtherProcesses(child.get(), 0) : OtherProcesses.NONE, manager);
            watch.sampleNow(0);   // 1.3 GiB in use beyond vmmkit's, read once: not yet attributed
            watch.sampleNow(0);   // read again, NVML asked: the child's part left out
            assertEquals(context, watch.peak(0).outsideBytes());
            listed.set(false);    // the child ended; the driver still counts its memory
            watch.sampleNow(0);
            child.set(0);         // and then releases it
            watch.sampleNow(0);
            assertEquals(context, watch.peak(0).outsideBytes(), watch.peak(0)::toString);

            child.set(700L << 20);
            listed.set(true);
            watch.sampleNow(0);
            watch.sampleNow(0);
            listed.set(false);    // another child ends just before the program's exit
            AtomicLong readsAtExit = new AtomicLong();
            watch.watch(1, device -> {
                VmmDriver.MemoryInfo info = driver.memoryInfo();
                long held = readsAtExit.incrementAndGet() <= 2 ? child.get() : 0; // released after the second read
                return new VmmDriver.MemoryInfo(info.freeBytes(), info.totalBytes() + context + held);
            }, device -> OtherProcesses.NONE, manager);
            watch.stop();
            assertEquals(context, watch.peak(1).outsideBytes(), watch.peak(1)::toString);
            assertTrue(readsAtExit.get() >= 3, "read again until the figure fell: " + readsAtExit.get());
        }
    }

    /** Started early, the watch's own thread starts the device's sampler, which samples without being asked. */
    @Test
    void aWatchStartedEarlySamplesOnAThreadOfItsOwn() throws InterruptedException {
        try (VmmDriver driver = Drivers.open(DriverKind.HOST, 0, 256L << 20);
             VmmManager manager = new VmmManager(driver, VmmConfig.DEFAULTS)) {
            NotServedWatch watch = new NotServedWatch();
            watch.startEarly();
            CountDownLatch sampled = new CountDownLatch(1);
            AtomicReference<String> sampler = new AtomicReference<>();
            Thread watcher = Thread.currentThread();
            watch.watch(0, device -> {
                if (Thread.currentThread() != watcher) {
                    sampler.compareAndSet(null, Thread.currentThread().getName());
                    sampled.countDown();
                }
                VmmDriver.MemoryInfo info = driver.memoryInfo();
                return new VmmDriver.MemoryInfo(info.freeBytes() - (8L << 20), info.totalBytes());
            }, device -> OtherProcesses.NONE, manager);
            sampled.await();
            watch.stop();
            assertEquals("vmmkit-not-served-0", sampler.get());
            assertEquals(8L << 20, watch.peak(0).outsideBytes());
        }
    }

    /** CUDA shut down before the sample at exit (a Python program's own exit): the peak so far stands, and nothing is said. */
    @Test
    void theLastSampleAfterCudaShutDownKeepsThePeakQuietly() {
        try (VmmDriver driver = Drivers.open(DriverKind.HOST, 0, 256L << 20);
             VmmManager manager = new VmmManager(driver, VmmConfig.DEFAULTS)) {
            AtomicLong elsewhere = new AtomicLong(32L << 20);
            AtomicBoolean shutDown = new AtomicBoolean();
            NotServedWatch watch = new NotServedWatch(0); // samples only when the test asks
            watch.watch(0, device -> {
                if (shutDown.get()) throw DriverException.of(CudaResult.DEINITIALIZED, "cuMemGetInfo_v2()");
                VmmDriver.MemoryInfo info = driver.memoryInfo();
                return new VmmDriver.MemoryInfo(info.freeBytes() - elsewhere.get(), info.totalBytes());
            }, device -> OtherProcesses.NONE, manager);
            watch.sampleNow(0);
            shutDown.set(true);
            PrintStream err = System.err;
            ByteArrayOutputStream printed = new ByteArrayOutputStream();
            System.setErr(new PrintStream(printed, true));
            try {
                watch.stop();
            } finally {
                System.setErr(err);
            }
            assertEquals("", printed.toString());
            assertEquals(32L << 20, watch.peak(0).outsideBytes());
        }
    }

    @Test
    void theStatsFileSaysWhatWasNotServedPerDevice() {
        String json = StatsWriter.vmmJson(List.of(new StatsWriter.DeviceFigures(0, manager0Stats(), 0)), 0,
                PeakProfileUse.NONE, device -> peak(5 * GIB, 6 * GIB));
        assertTrue(json.contains("\"not_served_bytes\":" + 5 * GIB), json);
    }

    private static dev.vmmkit.core.AllocatorStats manager0Stats() {
        return new dev.vmmkit.core.AllocatorStats(1, 1, 0, 10, 0, 10, 0, 0, 0, 0, Map.of());
    }
}
