package dev.vmmkit.driver.cuda;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * Native memory for out-parameters ({@code CUdeviceptr*}, {@code size_t*}, handles), one set per
 * thread, allocated once, so that a driver call allocates nothing. Two 8-byte slots cover every
 * call vmmkit makes (cuMemGetInfo has two outputs). The memory comes from an automatic arena: it
 * is freed once the thread, and with it its ThreadLocal entry, is gone.
 */
final class CudaScratch {
    private static final ThreadLocal<CudaScratch> PER_THREAD = ThreadLocal.withInitial(CudaScratch::new);

    /** First out-parameter slot (8 bytes). */
    final MemorySegment first;
    /** Second out-parameter slot (8 bytes). */
    final MemorySegment second;

    private CudaScratch() {
        MemorySegment slots = Arena.ofAuto().allocate(16, 8);
        first = slots.asSlice(0, 8);
        second = slots.asSlice(8, 8);
    }

    /** This thread's scratch slots. */
    static CudaScratch get() {
        return PER_THREAD.get();
    }

    long firstLong() {
        return first.get(JAVA_LONG, 0);
    }

    long secondLong() {
        return second.get(JAVA_LONG, 0);
    }

    int firstInt() {
        return first.get(JAVA_INT, 0);
    }
}
