package dev.vmmkit.driver;

/**
 * CUDA driver result codes that vmmkit names. Values are those of {@code CUresult} in cuda.h, so
 * the host emulation reports exactly what the driver would.
 */
public final class CudaResult {
    public static final int SUCCESS = 0;
    public static final int INVALID_VALUE = 1;
    public static final int OUT_OF_MEMORY = 2;
    public static final int NOT_INITIALIZED = 3;
    public static final int DEINITIALIZED = 4;
    public static final int NO_DEVICE = 100;
    public static final int INVALID_DEVICE = 101;
    public static final int INVALID_CONTEXT = 201;
    public static final int INVALID_HANDLE = 400;
    public static final int NOT_FOUND = 500;
    public static final int NOT_READY = 600;
    public static final int ILLEGAL_ADDRESS = 700;
    public static final int NOT_PERMITTED = 800;
    public static final int NOT_SUPPORTED = 801;
    public static final int STREAM_CAPTURE_UNSUPPORTED = 900;
    public static final int UNKNOWN = 999;

    private CudaResult() {
    }

    /** The enum name cuda.h gives a code, e.g. {@code CUDA_ERROR_OUT_OF_MEMORY}. */
    public static String name(int code) {
        return switch (code) {
            case SUCCESS -> "CUDA_SUCCESS";
            case INVALID_VALUE -> "CUDA_ERROR_INVALID_VALUE";
            case OUT_OF_MEMORY -> "CUDA_ERROR_OUT_OF_MEMORY";
            case NOT_INITIALIZED -> "CUDA_ERROR_NOT_INITIALIZED";
            case DEINITIALIZED -> "CUDA_ERROR_DEINITIALIZED";
            case NO_DEVICE -> "CUDA_ERROR_NO_DEVICE";
            case INVALID_DEVICE -> "CUDA_ERROR_INVALID_DEVICE";
            case INVALID_CONTEXT -> "CUDA_ERROR_INVALID_CONTEXT";
            case INVALID_HANDLE -> "CUDA_ERROR_INVALID_HANDLE";
            case NOT_FOUND -> "CUDA_ERROR_NOT_FOUND";
            case NOT_READY -> "CUDA_ERROR_NOT_READY";
            case ILLEGAL_ADDRESS -> "CUDA_ERROR_ILLEGAL_ADDRESS";
            case NOT_PERMITTED -> "CUDA_ERROR_NOT_PERMITTED";
            case NOT_SUPPORTED -> "CUDA_ERROR_NOT_SUPPORTED";
            case STREAM_CAPTURE_UNSUPPORTED -> "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
            case UNKNOWN -> "CUDA_ERROR_UNKNOWN";
            default -> "CUresult(" + code + ")";
        };
    }

    /** A short description, used where the driver's own string is not available. */
    public static String describe(int code) {
        return switch (code) {
            case SUCCESS -> "no error";
            case INVALID_VALUE -> "invalid argument";
            case OUT_OF_MEMORY -> "out of memory";
            case NOT_INITIALIZED -> "initialization error";
            case DEINITIALIZED -> "driver shutting down or closed";
            case NO_DEVICE -> "no CUDA-capable device is detected";
            case INVALID_DEVICE -> "invalid device ordinal";
            case INVALID_CONTEXT -> "invalid device context";
            case INVALID_HANDLE -> "invalid resource handle";
            case NOT_FOUND -> "named symbol not found";
            case NOT_READY -> "device not ready";
            case ILLEGAL_ADDRESS -> "an illegal memory access was encountered";
            case NOT_PERMITTED -> "operation not permitted";
            case NOT_SUPPORTED -> "operation not supported";
            case STREAM_CAPTURE_UNSUPPORTED -> "operation not permitted when stream is capturing";
            default -> "unknown error";
        };
    }
}
