package dev.vmmkit.driver.host;

import dev.vmmkit.driver.CallText;
import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.LibC;

/** The errors of the host emulation, with CUDA's codes (see {@link HostDriver} for which call gets which). */
final class HostErrors {
    private HostErrors() {
    }

    /** A bad argument: INVALID_VALUE, as CUDA documents for every memory call. */
    static DriverException invalid(String why, String call) {
        return new DriverException(CudaResult.INVALID_VALUE,
                CudaResult.describe(CudaResult.INVALID_VALUE) + ": " + why, call);
    }

    /** An OS call failed: out of memory for ENOMEM and descriptor or space exhaustion, else UNKNOWN. */
    static DriverException osFailure(String what, String call) {
        int errno = LibC.errno();
        int result = switch (errno) {
            case LibC.ENOMEM, LibC.EMFILE, LibC.ENFILE, LibC.ENOSPC -> CudaResult.OUT_OF_MEMORY;
            case LibC.EINVAL -> CudaResult.INVALID_VALUE;
            default -> CudaResult.UNKNOWN;
        };
        return new DriverException(result,
                CudaResult.describe(result) + ": " + what + " failed: " + LibC.describeErrno(errno), call);
    }

    /** INVALID_VALUE unless {@code size} is a positive multiple of {@code granularity} (a power of two). */
    static void requirePositiveMultiple(long size, long granularity, String call) {
        if (!isPositiveMultiple(size, granularity)) {
            throw invalid("size is not a positive multiple of the granularity " + CallText.hex(granularity), call);
        }
    }

    static boolean isPositiveMultiple(long size, long granularity) {
        return size > 0 && (size & (granularity - 1)) == 0;
    }
}
