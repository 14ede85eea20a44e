package dev.vmmkit.driver.cuda;

import static dev.vmmkit.driver.cuda.CudaErrors.failure;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Optional;
import java.util.function.Supplier;

import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverAdaptor;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.VmmDriver;

/**
 * What code that runs its own kernels on a {@link CudaDriver}'s device needs from the driver, and no
 * more: the driver's context made current, PTX modules loaded and unloaded, launches, host copies,
 * the device-wide wait, and a way to release its own resources before the context goes. The compute
 * layer reaches CUDA through this class only; the memory calls stay behind {@link VmmDriver}.
 */
public final class CudaModuleCalls {
    private static final long LOG_BYTES = 16 * 1024;
    // CUjit_option values from cuda.h.
    private static final int CU_JIT_INFO_LOG_BUFFER = 3;
    private static final int CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4;
    private static final int CU_JIT_ERROR_LOG_BUFFER = 5;
    private static final int CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;

    private final CudaDriver driver;
    private final CudaMemcpy memcpy;

    private CudaModuleCalls(CudaDriver driver) {
        this.driver = driver;
        this.memcpy = new CudaMemcpy(driver);
    }

    /** The calls of the CUDA driver under {@code driver}'s adaptors; empty when it is not a CUDA driver. */
    public static Optional<CudaModuleCalls> of(VmmDriver driver) {
        return DriverAdaptor.innermost(driver) instanceof CudaDriver cuda
                ? Optional.of(new CudaModuleCalls(cuda)) : Optional.empty();
    }

    /** Checks the driver is open and makes its context current; {@code function} names the call refused. */
    public void prepare(String function) {
        driver.prepare(function);
    }

    /** Loads a PTX module (JIT-compiled by the driver); a failure carries the JIT's error and info logs. */
    public long loadModule(String ptx, String name) {
        prepare("cuModuleLoadDataEx");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment image = arena.allocateFrom(ptx);
            MemorySegment errorLog = arena.allocate(LOG_BYTES);
            MemorySegment infoLog = arena.allocate(LOG_BYTES);
            MemorySegment options = arena.allocate(JAVA_INT, 4);
            MemorySegment values = arena.allocate(ADDRESS, 4);
            options.setAtIndex(JAVA_INT, 0, CU_JIT_ERROR_LOG_BUFFER);
            values.setAtIndex(ADDRESS, 0, errorLog);
            options.setAtIndex(JAVA_INT, 1, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
            values.setAtIndex(JAVA_LONG, 1, LOG_BYTES); // the size travels as the pointer's value
            options.setAtIndex(JAVA_INT, 2, CU_JIT_INFO_LOG_BUFFER);
            values.setAtIndex(ADDRESS, 2, infoLog);
            options.setAtIndex(JAVA_INT, 3, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES);
            values.setAtIndex(JAVA_LONG, 3, LOG_BYTES);
            MemorySegment out = arena.allocate(JAVA_LONG);
            int result = CudaApi.cuModuleLoadDataEx(out, image, 4, options, values);
            if (result != CudaResult.SUCCESS) {
                DriverException plain = failure(result, "cuModuleLoadDataEx(" + name + ")");
                throw new DriverException(result, plain.driverMessage() + "; JIT error log: "
                        + errorLog.getString(0).strip() + "; JIT info log: " + infoLog.getString(0).strip(),
                        plain.call());
            }
            return out.get(JAVA_LONG, 0);
        }
    }

    /** The function {@code entry} of a loaded module. */
    public long function(long module, String entry) {
        prepare("cuModuleGetFunction");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            int result = CudaApi.cuModuleGetFunction(out, module, arena.allocateFrom(entry));
            if (result != CudaResult.SUCCESS) {
                throw failure(result, "cuModuleGetFunction(" + entry + ")");
            }
            return out.get(JAVA_LONG, 0);
        }
    }

    /** Unloads a module from {@link #loadModule}. */
    public void unloadModule(long module) {
        prepare("cuModuleUnload");
        int result = CudaApi.cuModuleUnload(module);
        if (result != CudaResult.SUCCESS) {
            throw failure(result, "cuModuleUnload(module=0x" + Long.toHexString(module) + ")");
        }
    }

    /**
     * Launches {@code function} on the default stream with no shared memory; {@code argumentPointers}
     * is cuLaunchKernel's array of pointers to the arguments. {@code call} describes the launch for
     * the exception, built only on failure.
     */
    public void launch(long function, int gridX, int gridY, int blockX, int blockY, MemorySegment argumentPointers,
                       Supplier<String> call) {
        prepare("cuLaunchKernel");
        int result = CudaApi.cuLaunchKernel(function, gridX, gridY, 1, blockX, blockY, 1, 0, 0L,
                argumentPointers, MemorySegment.NULL);
        if (result != CudaResult.SUCCESS) {
            throw failure(result, call.get());
        }
    }

    /** Copies {@code bytes} bytes from host {@code src} to device address {@code dst}, after earlier work. */
    public void copyToDevice(long dst, MemorySegment src, long bytes) {
        memcpy.copyToDevice(dst, src, bytes);
    }

    /** Copies {@code bytes} bytes from device address {@code src} into host {@code dst}, after earlier work. */
    public void copyToHost(MemorySegment dst, long src, long bytes) {
        memcpy.copyToHost(dst, src, bytes);
    }

    /** Waits until all work queued on the device so far has finished. */
    public void synchronizeDevice() {
        driver.events().synchronizeDevice();
    }

    /**
     * Has the driver close {@code user} before it releases its context, if it is still open then
     * (modules and library handles must go while the context lives); {@link #forget} undoes it.
     */
    public void closeBeforeContext(AutoCloseable user) {
        driver.addContextUser(user);
    }

    /** Undoes {@link #closeBeforeContext}: {@code user} released its resources itself. */
    public void forget(AutoCloseable user) {
        driver.removeContextUser(user);
    }
}
