package dev.vmmkit.driver.cuda;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;

/**
 * The CUDA driver functions vmmkit calls, as FFM downcalls into {@code libcuda.so.1}.
 *
 * <p>Each static method calls the C function of the same name and returns its {@code CUresult}
 * untouched; {@link CudaDriver} turns non-zero results into exceptions. Exported names are the
 * ones cuda.h (CUDA 13.0) maps its macros to: {@code cuMemGetInfo} is really {@code cuMemGetInfo_v2}.
 *
 * <p>C types map as follows (64-bit Linux): {@code CUresult}, enums, {@code int}, {@code unsigned
 * int}, {@code CUdevice} are {@code JAVA_INT}; {@code size_t}, {@code CUdeviceptr},
 * {@code CUmemGenericAllocationHandle}, {@code unsigned long long} are {@code JAVA_LONG}. Opaque
 * handles passed by value ({@code CUcontext}, {@code CUevent}, {@code CUstream}) are also
 * {@code JAVA_LONG}: they are pointers, passed in the same register as a 64-bit integer, and a
 * {@code long} spares the hot path a MemorySegment wrapper. Out-parameters and structs are
 * {@code ADDRESS}.
 *
 * <p>Nothing here fails when libcuda is missing: the library is looked up lazily and
 * {@link #isLoaded()} says whether it was found. The handles live in {@link Calls}, a holder class
 * that callers reach only after {@code isLoaded()}; a symbol missing from an old driver becomes a
 * function that returns {@code CUDA_ERROR_NOT_FOUND} rather than an initialisation error.
 */
final class CudaApi {
    static final String LIBRARY = "libcuda.so.1";

    /** What a missing symbol returns: CUDA_ERROR_NOT_FOUND, "named symbol not found". */
    private static final int SYMBOL_NOT_FOUND = 500;

    private CudaApi() {
    }

    /** True when libcuda.so.1 could be loaded into this process. */
    static boolean isLoaded() {
        return Library.LOOKUP != null;
    }

    /** Why libcuda.so.1 could not be loaded (the dynamic loader's words), or null when it was. */
    static String loadFailure() {
        return Library.FAILURE;
    }

    /** Loads libcuda once, on first use; records the failure instead of throwing. */
    @SuppressWarnings("restricted") // native access is the point of this class
    private static final class Library {
        static final SymbolLookup LOOKUP;
        static final String FAILURE;

        static {
            SymbolLookup lookup = null;
            String failure = null;
            try {
                lookup = SymbolLookup.libraryLookup(LIBRARY, Arena.global());
            } catch (IllegalArgumentException | IllegalCallerException | UnsatisfiedLinkError e) {
                failure = String.valueOf(e.getMessage());
            }
            LOOKUP = lookup;
            FAILURE = failure;
        }
    }

    /** The downcall handles. Initialised on first call, which callers make only once libcuda loaded. */
    @SuppressWarnings("restricted")
    private static final class Calls {
        private static final Linker LINKER = Linker.nativeLinker();

        // Initialisation and devices.
        static final MethodHandle cuInit = bind("cuInit", JAVA_INT);
        static final MethodHandle cuDeviceGetCount = bind("cuDeviceGetCount", ADDRESS);
        static final MethodHandle cuDeviceGet = bind("cuDeviceGet", ADDRESS, JAVA_INT);
        static final MethodHandle cuDevicePrimaryCtxRetain = bind("cuDevicePrimaryCtxRetain", ADDRESS, JAVA_INT);
        static final MethodHandle cuDevicePrimaryCtxRelease = bind("cuDevicePrimaryCtxRelease_v2", JAVA_INT);
        static final MethodHandle cuCtxGetCurrent = bind("cuCtxGetCurrent", ADDRESS);
        static final MethodHandle cuCtxSetCurrent = bind("cuCtxSetCurrent", JAVA_LONG);
        static final MethodHandle cuCtxGetDevice = bind("cuCtxGetDevice", ADDRESS);
        static final MethodHandle cuMemGetInfo = bind("cuMemGetInfo_v2", ADDRESS, ADDRESS);

        // Virtual memory management.
        static final MethodHandle cuMemAddressReserve =
                bind("cuMemAddressReserve", ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG);
        static final MethodHandle cuMemAddressFree = bind("cuMemAddressFree", JAVA_LONG, JAVA_LONG);
        static final MethodHandle cuMemCreate = bind("cuMemCreate", ADDRESS, JAVA_LONG, ADDRESS, JAVA_LONG);
        static final MethodHandle cuMemRelease = bind("cuMemRelease", JAVA_LONG);
        static final MethodHandle cuMemMap =
                bind("cuMemMap", JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG);
        static final MethodHandle cuMemUnmap = bind("cuMemUnmap", JAVA_LONG, JAVA_LONG);
        static final MethodHandle cuMemSetAccess = bind("cuMemSetAccess", JAVA_LONG, JAVA_LONG, ADDRESS, JAVA_LONG);
        static final MethodHandle cuMemExportToShareableHandle =
                bind("cuMemExportToShareableHandle", ADDRESS, JAVA_LONG, JAVA_INT, JAVA_LONG);
        // The OS handle is passed as void *; a POSIX descriptor travels as that pointer's value.
        static final MethodHandle cuMemImportFromShareableHandle =
                bind("cuMemImportFromShareableHandle", ADDRESS, JAVA_LONG, JAVA_INT);
        static final MethodHandle cuDeviceGetAttribute = bind("cuDeviceGetAttribute", ADDRESS, JAVA_INT, JAVA_INT);
        static final MethodHandle cuDeviceGetPCIBusId = bind("cuDeviceGetPCIBusId", ADDRESS, JAVA_INT, JAVA_INT);
        static final MethodHandle cuMemGetAllocationGranularity =
                bind("cuMemGetAllocationGranularity", ADDRESS, ADDRESS, JAVA_INT);

        // Events.
        static final MethodHandle cuEventCreate = bind("cuEventCreate", ADDRESS, JAVA_INT);
        static final MethodHandle cuEventRecord = bind("cuEventRecord", JAVA_LONG, JAVA_LONG);
        static final MethodHandle cuEventQuery = bind("cuEventQuery", JAVA_LONG);
        static final MethodHandle cuEventSynchronize = bind("cuEventSynchronize", JAVA_LONG);
        static final MethodHandle cuEventDestroy = bind("cuEventDestroy_v2", JAVA_LONG);

        // Device-wide waits. cuda.h declares both without a _v2 macro (cuCtxSynchronize_v2 is a
        // different function, taking a context, and only in recent drivers).
        static final MethodHandle cuCtxSynchronize = bind("cuCtxSynchronize");
        static final MethodHandle cuThreadExchangeStreamCaptureMode = bind("cuThreadExchangeStreamCaptureMode", ADDRESS);

        // Copies (tests and benchmarks only).
        static final MethodHandle cuMemcpyHtoD = bind("cuMemcpyHtoD_v2", JAVA_LONG, ADDRESS, JAVA_LONG);
        static final MethodHandle cuMemcpyDtoH = bind("cuMemcpyDtoH_v2", ADDRESS, JAVA_LONG, JAVA_LONG);
        static final MethodHandle cuMemcpyDtoDAsync = bind("cuMemcpyDtoDAsync_v2", JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG);

        // Kernels (CudaModuleCalls, for the compute layer): a module of PTX, its functions, launches.
        static final MethodHandle cuModuleLoadDataEx =
                bind("cuModuleLoadDataEx", ADDRESS, ADDRESS, JAVA_INT, ADDRESS, ADDRESS);
        static final MethodHandle cuModuleGetFunction = bind("cuModuleGetFunction", ADDRESS, JAVA_LONG, ADDRESS);
        static final MethodHandle cuModuleUnload = bind("cuModuleUnload", JAVA_LONG);
        static final MethodHandle cuLaunchKernel = bind("cuLaunchKernel", JAVA_LONG,
                JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG, ADDRESS, ADDRESS);

        // Errors.
        static final MethodHandle cuGetErrorName = bind("cuGetErrorName", JAVA_INT, ADDRESS);
        static final MethodHandle cuGetErrorString = bind("cuGetErrorString", JAVA_INT, ADDRESS);

        /** A downcall returning CUresult (int), or a stand-in returning NOT_FOUND when the symbol is absent. */
        private static MethodHandle bind(String symbol, MemoryLayout... arguments) {
            FunctionDescriptor descriptor = FunctionDescriptor.of(JAVA_INT, arguments);
            MemorySegment address = Library.LOOKUP == null ? null : Library.LOOKUP.find(symbol).orElse(null);
            if (address != null) {
                return LINKER.downcallHandle(address, descriptor);
            }
            return MethodHandles.dropArguments(MethodHandles.constant(int.class, SYMBOL_NOT_FOUND), 0,
                    descriptor.toMethodType().parameterList());
        }
    }

    // One wrapper per function, so callers need neither invokeExact casts nor Throwable handling.

    static int cuInit(int flags) {
        try {
            return (int) Calls.cuInit.invokeExact(flags);
        } catch (Throwable t) {
            throw unexpected("cuInit", t);
        }
    }

    static int cuDeviceGetCount(MemorySegment count) {
        try {
            return (int) Calls.cuDeviceGetCount.invokeExact(count);
        } catch (Throwable t) {
            throw unexpected("cuDeviceGetCount", t);
        }
    }

    static int cuDeviceGet(MemorySegment device, int ordinal) {
        try {
            return (int) Calls.cuDeviceGet.invokeExact(device, ordinal);
        } catch (Throwable t) {
            throw unexpected("cuDeviceGet", t);
        }
    }

    /** The device's PCI bus id ("0000:3b:00.0"), NUL-terminated, in at most {@code length} bytes of {@code id}. */
    static int cuDeviceGetPCIBusId(MemorySegment id, int length, int device) {
        try {
            return (int) Calls.cuDeviceGetPCIBusId.invokeExact(id, length, device);
        } catch (Throwable t) {
            throw unexpected("cuDeviceGetPCIBusId", t);
        }
    }

    static int cuDevicePrimaryCtxRetain(MemorySegment context, int device) {
        try {
            return (int) Calls.cuDevicePrimaryCtxRetain.invokeExact(context, device);
        } catch (Throwable t) {
            throw unexpected("cuDevicePrimaryCtxRetain", t);
        }
    }

    static int cuDevicePrimaryCtxRelease(int device) {
        try {
            return (int) Calls.cuDevicePrimaryCtxRelease.invokeExact(device);
        } catch (Throwable t) {
            throw unexpected("cuDevicePrimaryCtxRelease_v2", t);
        }
    }

    static int cuCtxGetCurrent(MemorySegment context) {
        try {
            return (int) Calls.cuCtxGetCurrent.invokeExact(context);
        } catch (Throwable t) {
            throw unexpected("cuCtxGetCurrent", t);
        }
    }

    static int cuCtxGetDevice(MemorySegment device) {
        try {
            return (int) Calls.cuCtxGetDevice.invokeExact(device);
        } catch (Throwable t) {
            throw unexpected("cuCtxGetDevice", t);
        }
    }

    static int cuCtxSetCurrent(long context) {
        try {
            return (int) Calls.cuCtxSetCurrent.invokeExact(context);
        } catch (Throwable t) {
            throw unexpected("cuCtxSetCurrent", t);
        }
    }

    static int cuMemGetInfo(MemorySegment free, MemorySegment total) {
        try {
            return (int) Calls.cuMemGetInfo.invokeExact(free, total);
        } catch (Throwable t) {
            throw unexpected("cuMemGetInfo_v2", t);
        }
    }

    static int cuMemAddressReserve(MemorySegment va, long size, long alignment, long fixedVa, long flags) {
        try {
            return (int) Calls.cuMemAddressReserve.invokeExact(va, size, alignment, fixedVa, flags);
        } catch (Throwable t) {
            throw unexpected("cuMemAddressReserve", t);
        }
    }

    static int cuMemAddressFree(long va, long size) {
        try {
            return (int) Calls.cuMemAddressFree.invokeExact(va, size);
        } catch (Throwable t) {
            throw unexpected("cuMemAddressFree", t);
        }
    }

    static int cuMemCreate(MemorySegment handle, long size, MemorySegment prop, long flags) {
        try {
            return (int) Calls.cuMemCreate.invokeExact(handle, size, prop, flags);
        } catch (Throwable t) {
            throw unexpected("cuMemCreate", t);
        }
    }

    static int cuMemRelease(long handle) {
        try {
            return (int) Calls.cuMemRelease.invokeExact(handle);
        } catch (Throwable t) {
            throw unexpected("cuMemRelease", t);
        }
    }

    static int cuMemMap(long va, long size, long offset, long handle, long flags) {
        try {
            return (int) Calls.cuMemMap.invokeExact(va, size, offset, handle, flags);
        } catch (Throwable t) {
            throw unexpected("cuMemMap", t);
        }
    }

    static int cuMemUnmap(long va, long size) {
        try {
            return (int) Calls.cuMemUnmap.invokeExact(va, size);
        } catch (Throwable t) {
            throw unexpected("cuMemUnmap", t);
        }
    }

    static int cuMemSetAccess(long va, long size, MemorySegment descriptors, long count) {
        try {
            return (int) Calls.cuMemSetAccess.invokeExact(va, size, descriptors, count);
        } catch (Throwable t) {
            throw unexpected("cuMemSetAccess", t);
        }
    }

    static int cuMemExportToShareableHandle(MemorySegment shareable, long handle, int handleType, long flags) {
        try {
            return (int) Calls.cuMemExportToShareableHandle.invokeExact(shareable, handle, handleType, flags);
        } catch (Throwable t) {
            throw unexpected("cuMemExportToShareableHandle", t);
        }
    }

    static int cuMemImportFromShareableHandle(MemorySegment handle, long osHandle, int handleType) {
        try {
            return (int) Calls.cuMemImportFromShareableHandle.invokeExact(handle, osHandle, handleType);
        } catch (Throwable t) {
            throw unexpected("cuMemImportFromShareableHandle", t);
        }
    }

    static int cuDeviceGetAttribute(MemorySegment value, int attribute, int device) {
        try {
            return (int) Calls.cuDeviceGetAttribute.invokeExact(value, attribute, device);
        } catch (Throwable t) {
            throw unexpected("cuDeviceGetAttribute", t);
        }
    }

    static int cuMemGetAllocationGranularity(MemorySegment granularity, MemorySegment prop, int option) {
        try {
            return (int) Calls.cuMemGetAllocationGranularity.invokeExact(granularity, prop, option);
        } catch (Throwable t) {
            throw unexpected("cuMemGetAllocationGranularity", t);
        }
    }

    static int cuEventCreate(MemorySegment event, int flags) {
        try {
            return (int) Calls.cuEventCreate.invokeExact(event, flags);
        } catch (Throwable t) {
            throw unexpected("cuEventCreate", t);
        }
    }

    static int cuEventRecord(long event, long stream) {
        try {
            return (int) Calls.cuEventRecord.invokeExact(event, stream);
        } catch (Throwable t) {
            throw unexpected("cuEventRecord", t);
        }
    }

    static int cuEventQuery(long event) {
        try {
            return (int) Calls.cuEventQuery.invokeExact(event);
        } catch (Throwable t) {
            throw unexpected("cuEventQuery", t);
        }
    }

    static int cuEventSynchronize(long event) {
        try {
            return (int) Calls.cuEventSynchronize.invokeExact(event);
        } catch (Throwable t) {
            throw unexpected("cuEventSynchronize", t);
        }
    }

    static int cuEventDestroy(long event) {
        try {
            return (int) Calls.cuEventDestroy.invokeExact(event);
        } catch (Throwable t) {
            throw unexpected("cuEventDestroy_v2", t);
        }
    }

    static int cuCtxSynchronize() {
        try {
            return (int) Calls.cuCtxSynchronize.invokeExact();
        } catch (Throwable t) {
            throw unexpected("cuCtxSynchronize", t);
        }
    }

    static int cuThreadExchangeStreamCaptureMode(MemorySegment mode) {
        try {
            return (int) Calls.cuThreadExchangeStreamCaptureMode.invokeExact(mode);
        } catch (Throwable t) {
            throw unexpected("cuThreadExchangeStreamCaptureMode", t);
        }
    }

    static int cuMemcpyHtoD(long dstVa, MemorySegment src, long bytes) {
        try {
            return (int) Calls.cuMemcpyHtoD.invokeExact(dstVa, src, bytes);
        } catch (Throwable t) {
            throw unexpected("cuMemcpyHtoD_v2", t);
        }
    }

    static int cuMemcpyDtoH(MemorySegment dst, long srcVa, long bytes) {
        try {
            return (int) Calls.cuMemcpyDtoH.invokeExact(dst, srcVa, bytes);
        } catch (Throwable t) {
            throw unexpected("cuMemcpyDtoH_v2", t);
        }
    }

    static int cuMemcpyDtoDAsync(long dstVa, long srcVa, long bytes, long stream) {
        try {
            return (int) Calls.cuMemcpyDtoDAsync.invokeExact(dstVa, srcVa, bytes, stream);
        } catch (Throwable t) {
            throw unexpected("cuMemcpyDtoDAsync_v2", t);
        }
    }

    static int cuModuleLoadDataEx(MemorySegment module, MemorySegment image, int optionCount,
                                  MemorySegment options, MemorySegment optionValues) {
        try {
            return (int) Calls.cuModuleLoadDataEx.invokeExact(module, image, optionCount, options, optionValues);
        } catch (Throwable t) {
            throw unexpected("cuModuleLoadDataEx", t);
        }
    }

    static int cuModuleGetFunction(MemorySegment function, long module, MemorySegment name) {
        try {
            return (int) Calls.cuModuleGetFunction.invokeExact(function, module, name);
        } catch (Throwable t) {
            throw unexpected("cuModuleGetFunction", t);
        }
    }

    static int cuModuleUnload(long module) {
        try {
            return (int) Calls.cuModuleUnload.invokeExact(module);
        } catch (Throwable t) {
            throw unexpected("cuModuleUnload", t);
        }
    }

    static int cuLaunchKernel(long function, int gridX, int gridY, int gridZ, int blockX, int blockY, int blockZ,
                              int sharedMemBytes, long stream, MemorySegment kernelParams, MemorySegment extra) {
        try {
            return (int) Calls.cuLaunchKernel.invokeExact(function, gridX, gridY, gridZ, blockX, blockY, blockZ,
                    sharedMemBytes, stream, kernelParams, extra);
        } catch (Throwable t) {
            throw unexpected("cuLaunchKernel", t);
        }
    }

    static int cuGetErrorName(int result, MemorySegment name) {
        try {
            return (int) Calls.cuGetErrorName.invokeExact(result, name);
        } catch (Throwable t) {
            throw unexpected("cuGetErrorName", t);
        }
    }

    static int cuGetErrorString(int result, MemorySegment text) {
        try {
            return (int) Calls.cuGetErrorString.invokeExact(result, text);
        } catch (Throwable t) {
            throw unexpected("cuGetErrorString", t);
        }
    }

    /** Downcalls throw nothing themselves; keep errors as they are and wrap anything else. */
    private static RuntimeException unexpected(String function, Throwable t) {
        if (t instanceof Error error) {
            throw error;
        }
        if (t instanceof RuntimeException runtime) {
            return runtime;
        }
        return new IllegalStateException("unexpected failure calling " + function, t);
    }
}
