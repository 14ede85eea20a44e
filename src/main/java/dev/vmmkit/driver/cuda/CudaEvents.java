package dev.vmmkit.driver.cuda;

import dev.vmmkit.driver.CallText;
import static dev.vmmkit.driver.cuda.CudaErrors.failure;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.StreamEvents;

/**
 * {@link StreamEvents} on CUDA events. Events are created with timing disabled, which makes
 * record and query cheaper; a query that finds the work unfinished (CUDA_ERROR_NOT_READY) is an
 * answer, not a failure.
 *
 * <p>{@link #synchronizeDevice} is cuCtxSynchronize, in the relaxed stream-capture mode (the
 * thread's previous mode is put back afterwards, the push-pop use cuda.h recommends). The mode does
 * not make it safe beside another thread's CUDA-graph capture on the device: measured on an H100,
 * the call failed (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) and the capture was invalidated. The
 * allocator therefore never calls it while a capture is under way.
 */
final class CudaEvents implements StreamEvents {
    private final CudaDriver driver;

    CudaEvents(CudaDriver driver) {
        this.driver = driver;
    }

    @Override
    public long create() {
        long previous = driver.enter("cuEventCreate");
        try {
            CudaScratch scratch = CudaScratch.get();
            int result = CudaApi.cuEventCreate(scratch.first, CudaLayouts.CU_EVENT_DISABLE_TIMING);
            if (result != CudaResult.SUCCESS) {
                throw failure(result, CallText.eventCreate());
            }
            return scratch.firstLong();
        } finally {
            driver.leave(previous);
        }
    }

    @Override
    public void record(long event, long stream) {
        long previous = driver.enter("cuEventRecord");
        try {
            int result = CudaApi.cuEventRecord(event, stream);
            if (result != CudaResult.SUCCESS) {
                throw failure(result, CallText.eventRecord(event, stream));
            }
        } finally {
            driver.leave(previous);
        }
    }

    @Override
    public boolean isComplete(long event) {
        long previous = driver.enter("cuEventQuery");
        try {
            int result = CudaApi.cuEventQuery(event);
            if (result == CudaResult.SUCCESS) {
                return true;
            }
            if (result == CudaResult.NOT_READY) {
                return false;
            }
            throw failure(result, CallText.eventQuery(event));
        } finally {
            driver.leave(previous);
        }
    }

    @Override
    public void synchronize(long event) {
        long previous = driver.enter("cuEventSynchronize");
        try {
            int result = CudaApi.cuEventSynchronize(event);
            if (result != CudaResult.SUCCESS) {
                throw failure(result, CallText.eventSynchronize(event));
            }
        } finally {
            driver.leave(previous);
        }
    }

    @Override
    public void synchronizeDevice() {
        long previous = driver.enter("cuCtxSynchronize"); // this device's context: cuCtxSynchronize waits for the current one
        try {
            int previousMode = exchangeCaptureMode(CudaLayouts.CU_STREAM_CAPTURE_MODE_RELAXED);
            int synced = CudaApi.cuCtxSynchronize();
            int restored = exchangeCaptureModeResult(previousMode);
            if (synced != CudaResult.SUCCESS) {
                throw failure(synced, CallText.deviceSynchronize());
            }
            if (restored != CudaResult.SUCCESS) {
                throw failure(restored, CallText.exchangeCaptureMode(previousMode));
            }
        } finally {
            driver.leave(previous);
        }
    }

    @Override
    public void prepareThread() {
        driver.prepare("cuThreadExchangeStreamCaptureMode");
        int previousMode = exchangeCaptureMode(CudaLayouts.CU_STREAM_CAPTURE_MODE_RELAXED);
        int restored = exchangeCaptureModeResult(previousMode);
        if (restored != CudaResult.SUCCESS) {
            throw failure(restored, CallText.exchangeCaptureMode(previousMode));
        }
    }

    /** Sets this thread's stream-capture mode; returns the one it had. */
    private static int exchangeCaptureMode(int mode) {
        int result = exchangeCaptureModeResult(mode);
        if (result != CudaResult.SUCCESS) {
            throw failure(result, CallText.exchangeCaptureMode(mode));
        }
        return CudaScratch.get().firstInt();
    }

    private static int exchangeCaptureModeResult(int mode) {
        CudaScratch scratch = CudaScratch.get();
        scratch.first.set(JAVA_INT, 0, mode);
        return CudaApi.cuThreadExchangeStreamCaptureMode(scratch.first);
    }

    @Override
    public void destroy(long event) {
        long previous = driver.enter("cuEventDestroy_v2");
        try {
            int result = CudaApi.cuEventDestroy(event);
            if (result != CudaResult.SUCCESS) {
                throw failure(result, CallText.eventDestroy(event));
            }
        } finally {
            driver.leave(previous);
        }
    }
}
