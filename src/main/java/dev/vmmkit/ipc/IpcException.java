package dev.vmmkit.ipc;

/** An IPC call vmmkit refuses, with the CUDA runtime error the program gets. */
public final class IpcException extends Exception {
    /** cudaErrorInvalidValue: a vmmkit handle whose fields cannot be right, or a bad pointer. */
    public static final int INVALID_VALUE = 1;
    /** cudaErrorMapBufferObjectFailed: the export exists but this process cannot map it. */
    public static final int MAP_FAILED = 205;
    /** cudaErrorInvalidResourceHandle: the handle names an export that is gone (stale or closed). */
    public static final int INVALID_RESOURCE_HANDLE = 400;

    private final int cudaError;

    public IpcException(int cudaError, String message) {
        super(message, null, false, false);
        this.cudaError = cudaError;
    }

    public int cudaError() {
        return cudaError;
    }
}
