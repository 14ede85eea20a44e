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
 * so a current context for another device does not move allocations elsewhere. Calls bound to a
 * context (streams, events, synchronisation, copies on a stream) switch to this one for the call
 * and back when another device's context is current ({@link #enter}), so a program pausing a
 * memory tag with device 0 current also pauses the tag's memory on device 1 (on two H200s a backup
 * copy of device 1's memory issued under device 0's context failed with CUDA_ERROR_INVALID_VALUE,
 * and the synchronisation before it would have waited for device 0).
 */
final class PrimaryContext {
    private static final long NOTHING_TO_PUT_BACK = 0;
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

    /** The device of the context current on this thread. */
    private static int deviceOfCurrent() {
        CudaScratch scratch = CudaScratch.get();
        int result = CudaApi.cuCtxGetDevice(scratch.first);
        if (result != 0) {
            throw failure(result, CallText.currentContext());
        }
        return scratch.firstInt();
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
     * For a call bound to this device's context (a stream's or an event's, a synchronisation of the
     * device, the device's free memory): makes this context current when a context of another
     * device is, as on a program's thread whose current device is another one. Returns the context
     * to put back after the call ({@link #leave}); none when a context of this device was current
     * already (the program's own, whose streams and events are its) or none was (then this one
     * stays current, as {@link #makeCurrentIfNone} leaves it).
     */
    long enter() {
        long previous = current();
        if (previous == handle || previous != 0 && deviceOfCurrent() == cuDevice) return NOTHING_TO_PUT_BACK;
        int result = CudaApi.cuCtxSetCurrent(handle);
        if (result != 0) {
            throw failure(result, CallText.setCurrentContext(handle));
        }
        return previous;
    }

    /** Puts back the context {@link #enter} returned. */
    void leave(long previous) {
        if (previous == NOTHING_TO_PUT_BACK) return;
        int result = CudaApi.cuCtxSetCurrent(previous);
        if (result != 0) {
            throw failure(result, CallText.setCurrentContext(previous));
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
