package dev.vmmkit.driver.cuda;

import static dev.vmmkit.driver.cuda.CudaErrors.failure;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.vmmkit.driver.CallText;
import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.HostTransfers;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;

/**
 * Pinned host memory and asynchronous host copies through the CUDA driver: cuMemHostAlloc,
 * cuMemFreeHost, cuStreamCreate/Destroy, cuMemcpyDtoHAsync_v2, cuMemcpyHtoDAsync_v2. Its own
 * downcalls, bound on first use, so the calls the allocator makes on every slow path stay in
 * {@link CudaApi}.
 */
final class CudaTransfers implements HostTransfers {
    private static final int CU_STREAM_NON_BLOCKING = 1;
    /** CU_MEMHOSTALLOC_PORTABLE: pinned for every context, as cudaHostAlloc(cudaHostAllocPortable). */
    private static final int CU_MEMHOSTALLOC_PORTABLE = 1;

    /**
     * {@code VMM_PINNED_HOST}: {@code register} ({@link RegisteredHostMemory}, the default) or {@code alloc}
     * (cuMemHostAlloc). Register is the default because it pins faster on an H100 host and copies as
     * fast: 8 GiB in 0.5 s faulted in by 8 threads first, 1.5 s without, against 5.5 s
     * (scripts/gpu/pinning.py); a registration the host refuses falls back to cuMemHostAlloc, saying
     * so once.
     */
    public static final String PINNED_HOST = "VMM_PINNED_HOST";

    private final CudaDriver driver;
    /** Non-null when pinned memory is registered rather than allocated by the driver. */
    private final RegisteredHostMemory registered;
    /** Set once a registration failed: later pinning goes to cuMemHostAlloc. */
    private volatile boolean registrationRefused;
    private static final System.Logger LOG = System.getLogger(CudaTransfers.class.getName());

    CudaTransfers(CudaDriver driver) {
        this.driver = driver;
        this.registered = "alloc".equals(System.getenv(PINNED_HOST)) ? null : new RegisteredHostMemory(driver);
    }

    @Override
    public long allocatePinned(long bytes) {
        if (registered != null && !registrationRefused) {
            try {
                return registered.allocate(bytes);
            } catch (DriverException e) {
                // The driver shutting down (a pin ahead racing the program's exit) refuses any pinning: not the host's refusal.
                if (e.result() == CudaResult.DEINITIALIZED) throw e;
                registrationRefused = true;
                LOG.log(System.Logger.Level.WARNING, "vmmkit: cannot register pinned host memory (" + e.getMessage()
                        + "); pinning with cuMemHostAlloc from now on (" + PINNED_HOST + "=alloc pins that way from the start)");
            }
        }
        driver.prepare("cuMemHostAlloc");
        return outValue(out -> (int) Calls.cuMemHostAlloc.invokeExact(out, bytes, CU_MEMHOSTALLOC_PORTABLE),
                CallText.pinnedAllocate(bytes));
    }

    @Override
    public void freePinned(long address) {
        if (registered != null && registered.owns(address)) {
            registered.free(address);
            return;
        }
        driver.prepare("cuMemFreeHost");
        int result = call(Calls.cuMemFreeHost, address);
        if (result != CudaResult.SUCCESS) throw failure(result, CallText.pinnedFree(address));
    }

    @Override
    public long createStream() {
        long previous = driver.enter("cuStreamCreate");
        try {
            return outValue(out -> (int) Calls.cuStreamCreate.invokeExact(out, CU_STREAM_NON_BLOCKING), CallText.streamCreate());
        } finally {
            driver.leave(previous);
        }
    }

    @Override
    public void destroyStream(long stream) {
        long previous = driver.enter("cuStreamDestroy_v2");
        try {
            int result = call(Calls.cuStreamDestroy, stream);
            if (result != CudaResult.SUCCESS) throw failure(result, CallText.streamDestroy(stream));
        } finally {
            driver.leave(previous);
        }
    }

    @Override
    public void copyToHost(long host, long va, long bytes, long stream) {
        long previous = driver.enter("cuMemcpyDtoHAsync_v2");
        int result;
        try {
            result = (int) Calls.cuMemcpyDtoHAsync.invokeExact(host, va, bytes, stream);
        } catch (Throwable t) {
            throw new IllegalStateException("cuMemcpyDtoHAsync_v2", t);
        } finally {
            driver.leave(previous);
        }
        if (result != CudaResult.SUCCESS) throw failure(result, CallText.copyToHostAsync(host, va, bytes, stream));
    }

    @Override
    public void copyToDevice(long va, long host, long bytes, long stream) {
        long previous = driver.enter("cuMemcpyHtoDAsync_v2");
        int result;
        try {
            result = (int) Calls.cuMemcpyHtoDAsync.invokeExact(va, host, bytes, stream);
        } catch (Throwable t) {
            throw new IllegalStateException("cuMemcpyHtoDAsync_v2", t);
        } finally {
            driver.leave(previous);
        }
        if (result != CudaResult.SUCCESS) throw failure(result, CallText.copyToDeviceAsync(va, host, bytes, stream));
    }

    /** A call that writes one pointer-sized value to its first argument. */
    private interface OutCall {
        int call(MemorySegment out) throws Throwable;
    }

    /** Makes {@code call} with a fresh out-parameter; returns the value it wrote, or throws its CUresult. */
    private static long outValue(OutCall call, String text) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            int result;
            try {
                result = call.call(out);
            } catch (Throwable t) {
                throw new IllegalStateException(text, t);
            }
            if (result != CudaResult.SUCCESS) throw failure(result, text);
            return out.get(JAVA_LONG, 0);
        }
    }

    private static int call(MethodHandle handle, long argument) {
        try {
            return (int) handle.invokeExact(argument);
        } catch (Throwable t) {
            throw new IllegalStateException("CUDA call", t);
        }
    }

    /** The downcalls; host pointers are passed as plain 64-bit values. */
    @SuppressWarnings("restricted")
    private static final class Calls {
        private static final SymbolLookup LOOKUP = SymbolLookup.libraryLookup(CudaApi.LIBRARY, Arena.global());
        static final MethodHandle cuMemHostAlloc = bind("cuMemHostAlloc", ADDRESS, JAVA_LONG, JAVA_INT);
        static final MethodHandle cuMemFreeHost = bind("cuMemFreeHost", JAVA_LONG);
        static final MethodHandle cuStreamCreate = bind("cuStreamCreate", ADDRESS, JAVA_INT);
        static final MethodHandle cuStreamDestroy = bind("cuStreamDestroy_v2", JAVA_LONG);
        static final MethodHandle cuMemcpyDtoHAsync = bind("cuMemcpyDtoHAsync_v2", JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG);
        static final MethodHandle cuMemcpyHtoDAsync = bind("cuMemcpyHtoDAsync_v2", JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG);

        private static MethodHandle bind(String symbol, MemoryLayout... arguments) {
            MemorySegment address = LOOKUP.find(symbol).orElseThrow(() -> new IllegalStateException(symbol + " not in " + CudaApi.LIBRARY));
            return Linker.nativeLinker().downcallHandle(address, FunctionDescriptor.of(JAVA_INT, arguments));
        }
    }
}
