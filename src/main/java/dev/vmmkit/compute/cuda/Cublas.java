package dev.vmmkit.compute.cuda;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.cuda.CudaModuleCalls;

/**
 * Single-precision matrix products through cuBLAS ({@code cublasSgemm_v2}), called through FFM, for
 * machines that have libcublas; {@link CudaCompute} falls back to its PTX kernel where this is absent
 * or cannot express the operands' strides. Loaded from {@code VMMKIT_CUBLAS} (a path), else
 * {@code libcublas.so.13}/{@code .12} on the loader's path or under {@code CUDA_HOME} or
 * {@code /usr/local/cuda}. {@code VMMKIT_MATMUL=ptx} turns it off. cuBLAS keeps its own workspace,
 * outside vmmkit's allocator. Runs on the default stream, as the kernels do.
 */
@SuppressWarnings("restricted") // native calls are this class's whole job
final class Cublas {
    private static final int CUBLAS_OP_N = 0;
    private static final int CUBLAS_OP_T = 1;

    private final MethodHandle sgemm;
    private final MethodHandle destroy;
    private final String library;
    private final long handle;
    private final MemorySegment scalars; // alpha = 1, beta = 0, read by cuBLAS from host memory

    private Cublas(SymbolLookup lookup, String library, CudaModuleCalls cuda) {
        Linker linker = Linker.nativeLinker();
        MethodHandle create = linker.downcallHandle(find(lookup, "cublasCreate_v2"), FunctionDescriptor.of(JAVA_INT, ADDRESS));
        this.destroy = linker.downcallHandle(find(lookup, "cublasDestroy_v2"), FunctionDescriptor.of(JAVA_INT, JAVA_LONG));
        this.sgemm = linker.downcallHandle(find(lookup, "cublasSgemm_v2"), FunctionDescriptor.of(JAVA_INT,
                JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT,
                ADDRESS, JAVA_LONG, JAVA_INT, JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));
        this.library = library;
        this.scalars = Arena.ofAuto().allocate(8, 8);
        scalars.set(JAVA_FLOAT, 0, 1f);
        scalars.set(JAVA_FLOAT, 4, 0f);
        cuda.prepare("cublasCreate_v2");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            int status = (int) create.invokeExact(out);
            if (status != 0) throw failure(status, "cublasCreate_v2()");
            this.handle = out.get(JAVA_LONG, 0);
        } catch (DriverException e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("cublasCreate_v2 failed", t);
        }
    }

    /** cuBLAS on the device of {@code cuda}, or null when the library is absent, turned off, or will not start. */
    static Cublas open(CudaModuleCalls cuda) {
        if ("ptx".equalsIgnoreCase(System.getenv("VMMKIT_MATMUL"))) return null;
        for (String candidate : candidates()) {
            SymbolLookup lookup;
            try {
                lookup = SymbolLookup.libraryLookup(candidate, Arena.global());
            } catch (IllegalArgumentException | IllegalCallerException e) {
                continue;
            }
            try {
                return new Cublas(lookup, candidate, cuda);
            } catch (RuntimeException e) {
                System.getLogger(Cublas.class.getName()).log(System.Logger.Level.WARNING,
                        "cuBLAS from " + candidate + " unusable, matmul uses the PTX kernel: " + e.getMessage());
                return null;
            }
        }
        return null;
    }

    private static List<String> candidates() {
        List<String> names = new ArrayList<>();
        String explicit = System.getenv("VMMKIT_CUBLAS");
        if (explicit != null && !explicit.isBlank()) names.add(explicit);
        names.add("libcublas.so.13");
        names.add("libcublas.so.12");
        for (String home : new String[] {System.getenv("CUDA_HOME"), "/usr/local/cuda"}) {
            if (home == null) continue;
            for (String version : new String[] {"13", "12"}) {
                Path path = Path.of(home, "lib64", "libcublas.so." + version);
                if (Files.exists(path)) names.add(path.toString());
            }
        }
        return names;
    }

    /** Where the library came from, for reports. */
    String library() {
        return library;
    }

    /**
     * Row-major {@code c[m, n] = op(a) @ op(b)} with {@link dev.vmmkit.compute.DeviceCompute#matmul}'s
     * strides, or false (nothing done) when a stride pattern is not one cuBLAS takes.
     * Row-major C is column-major C^T = B'^T A'^T, so b comes first.
     */
    boolean matmul(CudaModuleCalls cuda, long c, long a, long b, int m, int n, int k,
                   long aRowStride, long aColStride, long bRowStride, long bColStride) {
        int opA, lda, opB, ldb;
        if (aColStride == 1 && aRowStride >= Math.max(1, k)) {
            opA = CUBLAS_OP_N;
            lda = (int) aRowStride;
        } else if (aRowStride == 1 && aColStride >= Math.max(1, m)) {
            opA = CUBLAS_OP_T;
            lda = (int) aColStride;
        } else {
            return false;
        }
        if (bColStride == 1 && bRowStride >= Math.max(1, n)) {
            opB = CUBLAS_OP_N;
            ldb = (int) bRowStride;
        } else if (bRowStride == 1 && bColStride >= Math.max(1, k)) {
            opB = CUBLAS_OP_T;
            ldb = (int) bColStride;
        } else {
            return false;
        }
        cuda.prepare("cublasSgemm_v2");
        int status;
        try {
            status = (int) sgemm.invokeExact(handle, opB, opA, n, m, k, scalars.asSlice(0, 4), b, ldb, a, lda,
                    scalars.asSlice(4, 4), c, n);
        } catch (Throwable t) {
            throw new IllegalStateException("cublasSgemm_v2 failed", t);
        }
        if (status != 0) {
            throw failure(status, "cublasSgemm_v2(" + (opB == CUBLAS_OP_N ? "N" : "T") + ", " + (opA == CUBLAS_OP_N ? "N" : "T")
                    + ", m=" + n + ", n=" + m + ", k=" + k + ", lda=" + ldb + ", ldb=" + lda + ", ldc=" + n + ")");
        }
        return true;
    }

    void close() {
        try {
            int status = (int) destroy.invokeExact(handle);
            if (status != 0) throw failure(status, "cublasDestroy_v2()");
        } catch (DriverException e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("cublasDestroy_v2 failed", t);
        }
    }

    private static MemorySegment find(SymbolLookup lookup, String symbol) {
        return lookup.find(symbol).orElseThrow(() -> new DriverException(CudaResult.NOT_FOUND,
                "symbol " + symbol + " missing from libcublas", "dlsym(" + symbol + ")"));
    }

    private static DriverException failure(int status, String call) {
        return new DriverException(CudaResult.UNKNOWN, "cuBLAS status " + statusName(status) + " (" + status + ")", call);
    }

    private static String statusName(int status) {
        return switch (status) {
            case 1 -> "CUBLAS_STATUS_NOT_INITIALIZED";
            case 3 -> "CUBLAS_STATUS_ALLOC_FAILED";
            case 7 -> "CUBLAS_STATUS_INVALID_VALUE";
            case 8 -> "CUBLAS_STATUS_ARCH_MISMATCH";
            case 11 -> "CUBLAS_STATUS_MAPPING_ERROR";
            case 13 -> "CUBLAS_STATUS_EXECUTION_FAILED";
            case 14 -> "CUBLAS_STATUS_INTERNAL_ERROR";
            case 15 -> "CUBLAS_STATUS_NOT_SUPPORTED";
            default -> "CUBLAS_STATUS_" + status;
        };
    }
}
