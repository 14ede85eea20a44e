package dev.vmmkit.driver.cuda;

import dev.vmmkit.driver.CallText;

import dev.vmmkit.driver.DeviceBytes;

import static dev.vmmkit.driver.cuda.CudaErrors.failure;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import dev.vmmkit.driver.CudaResult;

/**
 * Synchronous copies between host memory and device addresses, for tests and benchmarks that must
 * check what a mapping really holds (cuMemcpyHtoD_v2 / cuMemcpyDtoH_v2). The device range must be
 * mapped with access granted. Not used by the allocator itself.
 */
public final class CudaMemcpy implements DeviceBytes {
    private final CudaDriver driver;

    public CudaMemcpy(CudaDriver driver) {
        this.driver = driver;
    }

    /** Copies {@code bytes} bytes from host {@code src} to device address {@code dstVa}. */
    public void copyToDevice(long dstVa, MemorySegment src, long bytes) {
        checkBounds(src, bytes);
        driver.prepare("cuMemcpyHtoD_v2");
        if (!src.isNative()) {
            // The driver needs a native address; stage heap arrays through a temporary buffer.
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment staged = arena.allocate(bytes, 8);
                staged.copyFrom(src.asSlice(0, bytes));
                copyToDevice(dstVa, staged, bytes);
            }
            return;
        }
        int result = CudaApi.cuMemcpyHtoD(dstVa, src, bytes);
        if (result != CudaResult.SUCCESS) {
            throw failure(result, CallText.copyToDevice(dstVa, bytes));
        }
    }

    /** Copies {@code bytes} bytes from device address {@code srcVa} into host {@code dst}. */
    public void copyToHost(MemorySegment dst, long srcVa, long bytes) {
        checkBounds(dst, bytes);
        driver.prepare("cuMemcpyDtoH_v2");
        if (!dst.isNative()) {
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment staged = arena.allocate(bytes, 8);
                copyToHost(staged, srcVa, bytes);
                dst.asSlice(0, bytes).copyFrom(staged);
            }
            return;
        }
        int result = CudaApi.cuMemcpyDtoH(dst, srcVa, bytes);
        if (result != CudaResult.SUCCESS) {
            throw failure(result, CallText.copyToHost(srcVa, bytes));
        }
    }

    /** Writes {@code values} to device memory at {@code dstVa} (8 bytes each, native byte order). */
    public void writeLongs(long dstVa, long[] values) {
        copyToDevice(dstVa, MemorySegment.ofArray(values), (long) values.length * Long.BYTES);
    }

    /** Reads {@code count} longs from device memory at {@code srcVa}. */
    public long[] readLongs(long srcVa, int count) {
        long[] values = new long[count];
        copyToHost(MemorySegment.ofArray(values), srcVa, (long) count * Long.BYTES);
        return values;
    }

    /** Fills {@code bytes} bytes at {@code dstVa} with a pattern that differs per 8-byte word and per seed. */
    @Override
    public void fill(long dstVa, long bytes, long seed) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = arena.allocate(bytes, 8);
            for (long offset = 0; offset + Long.BYTES <= bytes; offset += Long.BYTES) {
                host.set(JAVA_LONG, offset, patternWord(seed, offset));
            }
            copyToDevice(dstVa, host, bytes);
        }
    }

    /**
     * Reads {@code bytes} bytes at {@code srcVa} back and returns the offset of the first word that
     * differs from {@link #fill}'s, or -1 when all match.
     */
    @Override
    public long firstMismatch(long srcVa, long bytes, long seed) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = arena.allocate(bytes, 8);
            copyToHost(host, srcVa, bytes);
            for (long offset = 0; offset + Long.BYTES <= bytes; offset += Long.BYTES) {
                if (host.get(JAVA_LONG, offset) != patternWord(seed, offset)) {
                    return offset;
                }
            }
            return -1;
        }
    }

    @Override
    public void writeLong(long address, long value) {
        writeLongs(address, new long[] {value});
    }

    @Override
    public long readLong(long address) {
        return readLongs(address, 1)[0];
    }

    private static long patternWord(long seed, long offset) {
        return DeviceBytes.patternWord(seed, offset);
    }

    private static void checkBounds(MemorySegment host, long bytes) {
        if (bytes < 0 || bytes > host.byteSize()) {
            throw new IndexOutOfBoundsException("copy of " + bytes + " bytes but host segment has " + host.byteSize());
        }
    }
}
