package dev.vmmkit.interpose;

import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.Map;

import static dev.vmmkit.interpose.NativeBootstrap.offset;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The training run behind {@code target/vmmkit.aot}, the AOT cache that cuts the shim's start time
 * (about 60 ms of ~165 ms measured): the build runs this class with {@code -XX:AOTCacheOutput}, and the
 * shim passes {@code -XX:AOTCache} when the file is next to the jar. It does what the shim does on its
 * first call: bootstrap (monitor mode, so no allocator is needed), then calls through the upcall stubs;
 * then it allocates and frees through a {@link VmmManager} on the driver {@code auto} finds (CUDA on
 * the GPU machine, where scripts/build-aot-cache.sh trains the runtime's cache), so the allocator's
 * classes are in the cache too, and pauses and resumes a kept and a discarded tag, so a program's
 * first pause does not load its classes; last, a peak profile's identity, writing and reading.
 */
public final class AotTraining {

    private AotTraining() {
    }

    public static void main(String[] args) throws Throwable {
        MemorySegment table = Arena.global().allocate(NativeBootstrap.TABLE);
        table.set(JAVA_INT, offset("table_size"), (int) NativeBootstrap.TABLE.byteSize());
        table.set(JAVA_INT, offset("monitor_mode"), 1); // no allocator needed
        table.set(JAVA_INT, offset("owns_jvm"), 1); // as if the shim owned the JVM
        if (NativeBootstrap.entryPoints(table.address()) != 0) throw new IllegalStateException("bootstrap failed");
        Linker linker = Linker.nativeLinker();
        MethodHandle allocate = linker.downcallHandle(table.get(ADDRESS, offset("allocate")),
                FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_LONG));
        MethodHandle release = linker.downcallHandle(table.get(ADDRESS, offset("release")),
                FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_LONG));
        MethodHandle recordAlloc = linker.downcallHandle(table.get(ADDRESS, offset("record_alloc")),
                FunctionDescriptor.ofVoid(JAVA_LONG, JAVA_LONG, JAVA_LONG));
        MethodHandle recordFree = linker.downcallHandle(table.get(ADDRESS, offset("record_free")),
                FunctionDescriptor.ofVoid(JAVA_LONG, JAVA_LONG));
        for (int i = 0; i < 1000; i++) {
            long ignored = (long) allocate.invokeExact(4096L, 0, 0L);
            int notOurs = (int) release.invokeExact(4096L, 0, -1L);
            recordAlloc.invokeExact(4096L + i, 512L, 0L);
            recordFree.invokeExact(4096L + i, 0L);
        }
        TagCallWarmUp.run(table, 1000); // so that a program's first pause finds its classes in the cache
        trainAllocator();
        trainWarmUp();
        trainPeakProfile();
    }

    /** The start-up warm-up's code (and, where libcuda is, every downcall linked), so it starts from the cache too. */
    private static void trainWarmUp() {
        StartUpWarmUp.exercise(true, VmmConfig.DEFAULTS);
    }

    /** A peak profile written and read back, as a run does at its exit and its successor at its start. */
    private static void trainPeakProfile() throws java.io.IOException {
        ProgramIdentity program = ProgramIdentity.current(System.getenv());
        PeakProfile profile = new PeakProfile("2026-01-01T00:00:00Z", program,
                java.util.List.of(new PeakProfile.DeviceFigures(0, 1L << 30, 1L << 30, 1)));
        if (PeakProfile.parse(profile.toJson()).device(0) == null || program.key().isEmpty()) {
            throw new IllegalStateException("peak profile round trip failed");
        }
    }

    /**
     * A device's allocator opened as the shim opens it, then its first calls, slow path included; a
     * failure only leaves them out of the cache.
     */
    private static void trainAllocator() {
        NotServedWatch watch = new NotServedWatch();
        watch.startEarly();
        try (VmmManager manager = (VmmManager) new VmmManagerFactory(Map.of("VMM_DRIVER", "auto"), PeakProfileUse.NONE,
                watch, null).open(0)) {
            long first = manager.allocate(256L << 20, 0); // a first large request: one handle, backed from nothing
            manager.deallocate(first, VmmManager.DEVICE_WIDE_STREAM);
            long[] held = new long[16];
            for (int round = 0; round < 200; round++) {
                for (int i = 0; i < held.length; i++) held[i] = manager.allocate(512L << (i % 14), round & 1);
                for (long address : held) manager.deallocate(address, round & 1);
            }
            manager.drain();
            trainTags(manager);
        } catch (Throwable e) {
            System.err.println("AotTraining: allocator not trained: " + e);
        } finally {
            watch.stop();
        }
    }

    /** Tagged allocations paused and resumed, contents kept and not, then freed. */
    private static void trainTags(VmmManager manager) {
        String[] tags = {"aot-training-kept", "aot-training-discarded"};
        long[] addresses = new long[tags.length];
        for (int i = 0; i < tags.length; i++) {
            manager.beginTagRegion(tags[i], i == 0);
            try {
                addresses[i] = manager.allocate(8L << 20, 0);
            } finally {
                manager.endTagRegion();
            }
        }
        for (int cycle = 0; cycle < 2; cycle++) {
            for (String tag : tags) manager.pause(tag);
            for (String tag : tags) manager.resume(tag);
        }
        for (long address : addresses) manager.deallocate(address, VmmManager.DEVICE_WIDE_STREAM);
        manager.freeKeptHostMemory();
    }
}
