package dev.vmmkit.driver;

/**
 * The one exception every driver failure becomes. It carries the result code, its cuda.h name, the
 * driver's own error string and the call with its arguments, e.g.
 * {@code cuMemCreate(size=0x200000, device=0) -> CUDA_ERROR_OUT_OF_MEMORY (2): out of memory}.
 */
public class DriverException extends RuntimeException {
    private final int result;
    private final String resultName;
    private final String driverMessage;
    private final String call;

    public DriverException(int result, String driverMessage, String call) {
        super(call + " -> " + CudaResult.name(result) + " (" + result + "): " + driverMessage);
        this.result = result;
        this.resultName = CudaResult.name(result);
        this.driverMessage = driverMessage;
        this.call = call;
    }

    /** Builds the exception with the emulation's description of {@code result}. */
    public static DriverException of(int result, String call) {
        return new DriverException(result, CudaResult.describe(result), call);
    }

    public int result() {
        return result;
    }

    public String resultName() {
        return resultName;
    }

    public String driverMessage() {
        return driverMessage;
    }

    public String call() {
        return call;
    }

    /** True for CUDA_ERROR_OUT_OF_MEMORY: the one failure that recovery (drain and retry) handles. */
    public boolean isOutOfMemory() {
        return result == CudaResult.OUT_OF_MEMORY;
    }
}
