package dev.vmmkit.driver.cuda;

import java.lang.foreign.MemorySegment;

import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverException;

/**
 * Turns a non-zero {@code CUresult} into a {@link DriverException} that names the call and its
 * arguments, e.g. {@code cuMemCreate(size=0x200000, device=0) -> CUDA_ERROR_OUT_OF_MEMORY (2): out
 * of memory}. The text is the driver's own (cuGetErrorString) when libcuda is loaded.
 *
 * <p>Callers build the call description only after a failure, so a successful call costs nothing.
 */
final class CudaErrors {

    /** Longest error string read back from the driver; its strings are short, static and NUL-terminated. */
    private static final long MAX_MESSAGE_BYTES = 4096;

    private CudaErrors() {
    }

    /** The exception for {@code result} returned by {@code call}. */
    static DriverException failure(int result, String call) {
        return new DriverException(result, message(result), call);
    }

    /** The driver's description of {@code result}, or vmmkit's own when the driver has none. */
    @SuppressWarnings("restricted") // reads the driver's static C string
    static String message(int result) {
        if (CudaApi.isLoaded()) {
            try {
                CudaScratch scratch = CudaScratch.get();
                if (CudaApi.cuGetErrorString(result, scratch.first) == CudaResult.SUCCESS) {
                    long address = scratch.firstLong();
                    if (address != 0) {
                        return MemorySegment.ofAddress(address).reinterpret(MAX_MESSAGE_BYTES).getString(0);
                    }
                }
            } catch (RuntimeException ignored) {
                // Fall through to the built-in text: reporting the original failure matters more.
            }
        }
        return CudaResult.describe(result);
    }
}
