package dev.vmmkit.driver.cuda;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import org.junit.jupiter.api.Test;

/**
 * The struct layouts must match CUDA 13.0's cuda.h byte for byte. The expected numbers come from a
 * C program compiled against that header:
 * <pre>
 * CUmemAllocationProp: size=32 align=8 type=0 requestedHandleTypes=4 location.type=8 location.id=12
 *                      win32HandleMetaData=16 allocFlags=24 (compressionType=24 gpuDirectRDMACapable=25
 *                      usage=26 reserved=28)
 * CUmemAccessDesc:     size=12 align=4 location=0 flags=8
 * </pre>
 */
class CudaLayoutsTest {

    @Test
    void allocationPropMatchesCudaH() {
        assertEquals(32, CudaLayouts.ALLOCATION_PROP.byteSize());
        assertEquals(8, CudaLayouts.ALLOCATION_PROP.byteAlignment());
        assertEquals(0, CudaLayouts.PROP_TYPE);
        assertEquals(4, CudaLayouts.PROP_REQUESTED_HANDLE_TYPES);
        assertEquals(8, CudaLayouts.PROP_LOCATION_TYPE);
        assertEquals(12, CudaLayouts.PROP_LOCATION_ID);
        assertEquals(16, CudaLayouts.PROP_WIN32_METADATA);
        assertEquals(24, CudaLayouts.PROP_ALLOC_FLAGS);
        assertEquals(8, CudaLayouts.ALLOC_FLAGS.byteSize());
        assertEquals(8, ADDRESS.byteSize(), "vmmkit assumes a 64-bit platform");
    }

    @Test
    void accessDescMatchesCudaH() {
        assertEquals(12, CudaLayouts.ACCESS_DESC.byteSize());
        assertEquals(4, CudaLayouts.ACCESS_DESC.byteAlignment());
        assertEquals(0, CudaLayouts.ACCESS_LOCATION_TYPE);
        assertEquals(4, CudaLayouts.ACCESS_LOCATION_ID);
        assertEquals(8, CudaLayouts.ACCESS_FLAGS);
    }

    @Test
    void constantsMatchCudaH() {
        assertEquals(1, CudaLayouts.CU_MEM_ALLOCATION_TYPE_PINNED);
        assertEquals(0, CudaLayouts.CU_MEM_HANDLE_TYPE_NONE);
        assertEquals(1, CudaLayouts.CU_MEM_LOCATION_TYPE_DEVICE);
        assertEquals(3, CudaLayouts.CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
        assertEquals(1, CudaLayouts.CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
        assertEquals(2, CudaLayouts.CU_EVENT_DISABLE_TIMING);
        assertEquals(2, CudaLayouts.CU_STREAM_CAPTURE_MODE_RELAXED);
    }

    @Test
    void allocationPropHoldsPinnedDeviceMemoryAndZeroesElsewhere() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment prop = CudaLayouts.allocationProp(arena, 3, false);
            assertEquals(32, prop.byteSize());
            assertEquals(1, prop.get(JAVA_INT, 0), "type = PINNED");
            assertEquals(0, prop.get(JAVA_INT, 4), "requestedHandleTypes = NONE");
            assertEquals(1, prop.get(JAVA_INT, 8), "location.type = DEVICE");
            assertEquals(3, prop.get(JAVA_INT, 12), "location.id = device");
            assertEquals(0, prop.get(JAVA_LONG, 16), "win32HandleMetaData = NULL");
            assertEquals(0, prop.get(JAVA_LONG, 24), "allocFlags all zero");
        }
    }

    @Test
    void accessDescGrantsReadWriteToTheDevice() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment desc = CudaLayouts.readWriteAccess(arena, 2);
            assertEquals(12, desc.byteSize());
            assertEquals(1, desc.get(JAVA_INT, 0), "location.type = DEVICE");
            assertEquals(2, desc.get(JAVA_INT, 4), "location.id = device");
            assertEquals(3, desc.get(JAVA_INT, 8), "flags = PROT_READWRITE");
        }
    }

    @Test
    void exportablePropAsksForPosixDescriptors() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment prop = CudaLayouts.allocationProp(arena, 0, true);
            assertEquals(1, prop.get(JAVA_INT, 4), "requestedHandleTypes = POSIX_FILE_DESCRIPTOR");
        }
    }

    @Test
    void accessDescriptorsListGrantsThenRevokes() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment descs = CudaLayouts.accessDescriptors(arena, 0b101, 0b010);
            assertEquals(36, descs.byteSize());
            int[][] expected = {{0, 3}, {2, 3}, {1, 0}}; // device, flags
            for (int i = 0; i < 3; i++) {
                assertEquals(1, descs.get(JAVA_INT, 12L * i), "location.type = DEVICE");
                assertEquals(expected[i][0], descs.get(JAVA_INT, 12L * i + 4), "location.id");
                assertEquals(expected[i][1], descs.get(JAVA_INT, 12L * i + 8), "flags");
            }
        }
    }
}
