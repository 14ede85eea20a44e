package dev.vmmkit.driver.cuda;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.List;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The CUDA runtime's stream-ordered allocator (cudaMallocAsync / cudaFreeAsync on the device's
 * default memory pool, stream 0) through FFM on libcudart: the anchor {@code vmmkit replay
 * --backend cuda-malloc-async} measures vmmkit against, in the same run. The pool keeps what it
 * reserved (release threshold: unlimited), as frameworks set it; its reserved high watermark is
 * the peak physical memory.
 *
 * <p>libcudart is found through {@code VMM_CUDART} (a path), else the loader's search path
 * ({@code libcudart.so.13}, {@code .12}, {@code libcudart.so}), else {@code /usr/local/cuda/lib64}.
 * Not thread-safe: one replay at a time.
 */
@SuppressWarnings("restricted") // native access is the point of this class
public final class CudaRuntimePool implements AutoCloseable {
    private static final int RELEASE_THRESHOLD = 4;   // cudaMemPoolAttrReleaseThreshold
    private static final int RESERVED_MEM_CURRENT = 5; // cudaMemPoolAttrReservedMemCurrent
    private static final int RESERVED_MEM_HIGH = 6;    // cudaMemPoolAttrReservedMemHigh

    private final MethodHandle mallocAsync;
    private final MethodHandle freeAsync;
    private final MethodHandle streamSynchronize;
    private final MethodHandle getAttribute;
    private final MethodHandle setAttribute;
    private final MethodHandle trimTo;
    private final MethodHandle errorString;
    private final Arena arena = Arena.ofConfined();
    private final MemorySegment out = arena.allocate(JAVA_LONG);
    private final long pool;

    private CudaRuntimePool(SymbolLookup cudart, int device) {
        Linker linker = Linker.nativeLinker();
        mallocAsync = bind(linker, cudart, "cudaMallocAsync", ADDRESS, JAVA_LONG, JAVA_LONG);
        freeAsync = bind(linker, cudart, "cudaFreeAsync", JAVA_LONG, JAVA_LONG);
        streamSynchronize = bind(linker, cudart, "cudaStreamSynchronize", JAVA_LONG);
        getAttribute = bind(linker, cudart, "cudaMemPoolGetAttribute", JAVA_LONG, JAVA_INT, ADDRESS);
        setAttribute = bind(linker, cudart, "cudaMemPoolSetAttribute", JAVA_LONG, JAVA_INT, ADDRESS);
        trimTo = bind(linker, cudart, "cudaMemPoolTrimTo", JAVA_LONG, JAVA_LONG);
        errorString = linker.downcallHandle(cudart.find("cudaGetErrorString").orElseThrow(),
                FunctionDescriptor.of(ADDRESS, JAVA_INT));
        MethodHandle setDevice = bind(linker, cudart, "cudaSetDevice", JAVA_INT);
        MethodHandle defaultPool = bind(linker, cudart, "cudaDeviceGetDefaultMemPool", ADDRESS, JAVA_INT);
        check(invoke(setDevice, device), "cudaSetDevice(" + device + ")");
        check(invoke(defaultPool, out, device), "cudaDeviceGetDefaultMemPool(" + device + ")");
        pool = out.get(JAVA_LONG, 0);
        out.set(JAVA_LONG, 0, -1L);
        check(invoke(setAttribute, pool, RELEASE_THRESHOLD, out), "cudaMemPoolSetAttribute(ReleaseThreshold)");
    }

    /**
     * Opens the default pool of {@code device}.
     *
     * @throws IllegalStateException naming what is missing (no libcudart, no GPU)
     */
    public static CudaRuntimePool open(int device) {
        List<String> tried = new ArrayList<>();
        String configured = System.getenv("VMM_CUDART");
        List<String> names = new ArrayList<>();
        if (configured != null && !configured.isBlank()) names.add(configured.trim());
        names.addAll(List.of("libcudart.so.13", "libcudart.so.12", "libcudart.so",
                "/usr/local/cuda/lib64/libcudart.so.13", "/usr/local/cuda/lib64/libcudart.so"));
        for (String name : names) {
            SymbolLookup cudart;
            try {
                cudart = SymbolLookup.libraryLookup(name, Arena.global());
            } catch (IllegalArgumentException notFound) {
                tried.add(name);
                continue;
            }
            try {
                return new CudaRuntimePool(cudart, device);
            } catch (IllegalArgumentException | IllegalStateException e) {
                throw new IllegalStateException("the cuda-malloc-async backend needs a GPU: " + name + ": " + e.getMessage(), e);
            }
        }
        throw new IllegalStateException("the cuda-malloc-async backend needs the CUDA runtime (libcudart) and a GPU; "
                + "none found (tried " + String.join(", ", tried) + "; set VMM_CUDART to its path)");
    }

    /** cudaMallocAsync on stream 0; the address. */
    public long allocate(long size) {
        int result;
        try {
            result = (int) mallocAsync.invokeExact(out, size, 0L);
        } catch (Throwable e) {
            throw new IllegalStateException("calling cudaMallocAsync", e);
        }
        check(result, "cudaMallocAsync(size=" + size + ")");
        return out.get(JAVA_LONG, 0);
    }

    /** cudaFreeAsync on stream 0. */
    public void free(long address) {
        int result;
        try {
            result = (int) freeAsync.invokeExact(address, 0L);
        } catch (Throwable e) {
            throw new IllegalStateException("calling cudaFreeAsync", e);
        }
        check(result, "cudaFreeAsync(0x" + Long.toHexString(address) + ")");
    }

    /** Bytes the pool holds now. */
    public long reservedBytes() {
        return attribute(RESERVED_MEM_CURRENT);
    }

    /** The most bytes the pool held since it was last {@linkplain #reset}. */
    public long peakReservedBytes() {
        return attribute(RESERVED_MEM_HIGH);
    }

    /** Waits for stream 0, gives every unused byte back and restarts the high watermark. */
    public void reset() {
        check(invoke(streamSynchronize, 0L), "cudaStreamSynchronize(0)");
        check(invoke(trimTo, pool, 0L), "cudaMemPoolTrimTo(0)");
        out.set(JAVA_LONG, 0, 0L);
        check(invoke(setAttribute, pool, RESERVED_MEM_HIGH, out), "cudaMemPoolSetAttribute(ReservedMemHigh, 0)");
    }

    @Override
    public void close() {
        reset();
        arena.close();
    }

    private long attribute(int attribute) {
        check(invoke(getAttribute, pool, attribute, out), "cudaMemPoolGetAttribute(" + attribute + ")");
        return out.get(JAVA_LONG, 0);
    }

    private void check(int result, String call) {
        if (result == 0) return;
        String text;
        try {
            text = ((MemorySegment) errorString.invokeExact(result)).reinterpret(256).getString(0);
        } catch (Throwable e) {
            text = "error " + result;
        }
        throw new IllegalStateException(call + " -> " + result + ": " + text);
    }

    private static MethodHandle bind(Linker linker, SymbolLookup lookup, String name,
                                     java.lang.foreign.MemoryLayout... arguments) {
        MemorySegment symbol = lookup.find(name).orElseThrow(() -> new IllegalArgumentException("no " + name));
        return linker.downcallHandle(symbol, FunctionDescriptor.of(JAVA_INT, arguments));
    }

    private static int invoke(MethodHandle handle, Object... arguments) {
        try {
            return (int) handle.invokeWithArguments(arguments);
        } catch (Throwable e) {
            throw new IllegalStateException("calling " + handle, e);
        }
    }
}
