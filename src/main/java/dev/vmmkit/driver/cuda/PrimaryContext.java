package dev.vmmkit.driver.cuda;

import dev.vmmkit.driver.CallText;

import static dev.vmmkit.driver.cuda.CudaErrors.failure;

/**
 * The device's primary context, retained for as long as a {@link CudaDriver} is open.
 *
 * <p>Driver calls need a current context on the calling thread. A host program that already uses
 * the CUDA runtime (the LD_PRELOAD case) has made one current, and vmmkit must use it rather than
 * switch it away. So before each call vmmkit only fills the gap: if the thread has no current
 * context, it makes the primary context current (about 0.07 us). The primary context is the same
 * one the CUDA runtime uses, so this matches what cudaMalloc would do on a fresh thread.
 *
 * <p>Memory calls name their device explicitly (CUmemAllocationProp and CUmemAccessDesc carry it),
 * so a current context for another device does not move allocations elsewhere.
 */
final class PrimaryContext {
    private final int cuDevice;
    private final long handle;

    private PrimaryContext(int cuDevice, long handle) {
        this.cuDevice = cuDevice;
        this.handle = handle;
    }

    /** Retains (creating if needed) the primary context of {@code cuDevice}; does not make it current. */
    static PrimaryContext retain(int cuDevice) {
        CudaScratch scratch = CudaScratch.get();
        int result = CudaApi.cuDevicePrimaryCtxRetain(scratch.first, cuDevice);
        if (result != 0) {
            throw failure(result, CallText.primaryContextRetain(cuDevice));
        }
        return new PrimaryContext(cuDevice, scratch.firstLong());
    }

    /** The CUcontext handle. */
    long handle() {
        return handle;
    }

    /** The context current on this thread (0 when none). */
    static long current() {
        CudaScratch scratch = CudaScratch.get();
        int result = CudaApi.cuCtxGetCurrent(scratch.first);
        if (result != 0) {
            throw failure(result, CallText.currentContext());
        }
        return scratch.firstLong();
    }

    /** Makes the primary context current unless this thread already has a current context. */
    void makeCurrentIfNone() {
        if (current() != 0) {
            return;
        }
        int result = CudaApi.cuCtxSetCurrent(handle);
        if (result != 0) {
            throw failure(result, CallText.setCurrentContext(handle));
        }
    }

    /**
     * Gives back the reference {@link #retain} took. The driver destroys the context only when no
     * one else (the CUDA runtime, another driver instance) still holds it.
     */
    void release() {
        int result = CudaApi.cuDevicePrimaryCtxRelease(cuDevice);
        if (result != 0) {
            throw failure(result, CallText.primaryContextRelease(cuDevice));
        }
    }
}
