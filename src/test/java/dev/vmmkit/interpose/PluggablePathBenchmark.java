package dev.vmmkit.interpose;

import dev.vmmkit.core.VmmConfig;
import dev.vmmkit.core.VmmManager;
import dev.vmmkit.driver.host.HostDriver;
import dev.vmmkit.trace.AllocationRecorder;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.util.concurrent.TimeUnit;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * One cache-hit allocate+free pair of the pluggable path, layer by layer, on the host emulation:
 * {@code manager} (VmmManager's bookkeeping alone), {@code interposed} (InterposedCalls, as the shim's
 * upcalls reach it: device lookup, ownership, IPC checks, then the manager) and {@code upcalls} (two
 * FFM calls through upcall stubs to Java methods that do nothing, with the shim's signatures: the
 * price of crossing into Java and back, here from a Java downcall; {@code downcalls}, two downcalls
 * to libc's labs, is that downcall's share).
 * The whole path from C is {@code bench_pair SIZE N torch} under {@code vmmkit run}; its figure less
 * {@code interposed} is the shim's C code and the upcalls. Run with
 * {@code scripts/run-test-class.sh org.openjdk.jmh.Main PluggablePathBenchmark}.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class PluggablePathBenchmark {

    @Param({"4096"})
    public long size;

    /** 0: the default stream; another value: a stream of the program's own, as PyTorch's side streams. */
    @Param({"0", "4660"})
    public long stream;

    private HostDriver driver;
    private VmmManager manager;
    private MethodHandle allocateUpcall;
    private MethodHandle releaseUpcall;
    private MethodHandle labs;

    @Setup(Level.Trial)
    public void setUp() throws ReflectiveOperationException {
        driver = HostDriver.builder().build();
        manager = new VmmManager(driver, VmmConfig.DEFAULTS);
        InterposedCalls.install(new InterposeSession(false, device -> manager, AllocationRecorder.NONE, null));
        Linker linker = Linker.nativeLinker();
        FunctionDescriptor allocate = FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_LONG);
        FunctionDescriptor release = FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_LONG);
        MethodHandles.Lookup lookup = MethodHandles.lookup();
        MemorySegment allocateStub = linker.upcallStub(lookup.findStatic(PluggablePathBenchmark.class, "nothingAllocated",
                allocate.toMethodType()), allocate, Arena.global());
        MemorySegment releaseStub = linker.upcallStub(lookup.findStatic(PluggablePathBenchmark.class, "nothingReleased",
                release.toMethodType()), release, Arena.global());
        allocateUpcall = linker.downcallHandle(allocateStub, allocate);
        releaseUpcall = linker.downcallHandle(releaseStub, release);
        labs = linker.downcallHandle(linker.defaultLookup().findOrThrow("labs"), FunctionDescriptor.of(JAVA_LONG, JAVA_LONG));
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        manager.close();
        driver.close();
    }

    static long nothingAllocated(long size, int device, long stream) {
        return size;
    }

    static int nothingReleased(long address, int device, long stream) {
        return 0;
    }

    @Benchmark
    public long manager() {
        long address = manager.allocate(size, stream);
        manager.deallocate(address, stream);
        return address;
    }

    @Benchmark
    public long interposed() {
        long address = InterposedCalls.allocate(size, 0, stream);
        return address + InterposedCalls.release(address, 0, stream);
    }

    @Benchmark
    public long upcalls() throws Throwable {
        long address = (long) allocateUpcall.invokeExact(size, 0, stream);
        return address + (int) releaseUpcall.invokeExact(address, 0, stream);
    }

    /** Two downcalls to a C function that does next to nothing: {@code upcalls} less this is two upcalls. */
    @Benchmark
    public long downcalls() throws Throwable {
        long a = (long) labs.invokeExact(size);
        return a + (long) labs.invokeExact(stream);
    }
}
