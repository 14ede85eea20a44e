package dev.vmmkit.driver.cuda;

import static java.lang.foreign.MemoryLayout.PathElement.groupElement;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import java.lang.foreign.Arena;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;

/**
 * The two structs the VMM calls take, and the enum values vmmkit puts in them, as declared in
 * CUDA 13.0's cuda.h. Sizes and offsets were checked against that header with a C compiler
 * (sizeof/offsetof): CUmemAllocationProp is 32 bytes, CUmemAccessDesc 12.
 */
final class CudaLayouts {

    // Enum values from cuda.h.
    static final int CU_MEM_ALLOCATION_TYPE_PINNED = 1;
    static final int CU_MEM_HANDLE_TYPE_NONE = 0;
    static final int CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1;
    static final int CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = 103;
    static final int CU_MEM_ACCESS_FLAGS_PROT_NONE = 0;
    static final int CU_MEM_LOCATION_TYPE_DEVICE = 1;
    static final int CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3;
    static final int CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1;
    static final int CU_EVENT_DISABLE_TIMING = 2;
    /** CUstreamCaptureMode: this thread's calls never invalidate another thread's stream capture. */
    static final int CU_STREAM_CAPTURE_MODE_RELAXED = 2;

    /** {@code struct CUmemLocation_st { CUmemLocationType type; int id; }} (8 bytes). */
    static final StructLayout MEM_LOCATION = MemoryLayout.structLayout(
            JAVA_INT.withName("type"),
            JAVA_INT.withName("id"))
            .withName("CUmemLocation");

    /** The anonymous {@code allocFlags} struct inside CUmemAllocationProp (8 bytes). */
    static final StructLayout ALLOC_FLAGS = MemoryLayout.structLayout(
            JAVA_BYTE.withName("compressionType"),
            JAVA_BYTE.withName("gpuDirectRDMACapable"),
            JAVA_SHORT.withName("usage"),
            MemoryLayout.sequenceLayout(4, JAVA_BYTE).withName("reserved"))
            .withName("allocFlags");

    /** {@code struct CUmemAllocationProp_st} (32 bytes, 8-byte aligned). */
    static final StructLayout ALLOCATION_PROP = MemoryLayout.structLayout(
            JAVA_INT.withName("type"),
            JAVA_INT.withName("requestedHandleTypes"),
            MEM_LOCATION.withName("location"),
            ADDRESS.withName("win32HandleMetaData"),
            ALLOC_FLAGS.withName("allocFlags"))
            .withName("CUmemAllocationProp");

    /** {@code struct CUmemAccessDesc_st { CUmemLocation location; CUmemAccess_flags flags; }} (12 bytes). */
    static final StructLayout ACCESS_DESC = MemoryLayout.structLayout(
            MEM_LOCATION.withName("location"),
            JAVA_INT.withName("flags"))
            .withName("CUmemAccessDesc");

    static final long PROP_TYPE = ALLOCATION_PROP.byteOffset(groupElement("type"));
    static final long PROP_REQUESTED_HANDLE_TYPES = ALLOCATION_PROP.byteOffset(groupElement("requestedHandleTypes"));
    static final long PROP_LOCATION_TYPE = ALLOCATION_PROP.byteOffset(groupElement("location"), groupElement("type"));
    static final long PROP_LOCATION_ID = ALLOCATION_PROP.byteOffset(groupElement("location"), groupElement("id"));
    static final long PROP_WIN32_METADATA = ALLOCATION_PROP.byteOffset(groupElement("win32HandleMetaData"));
    static final long PROP_ALLOC_FLAGS = ALLOCATION_PROP.byteOffset(groupElement("allocFlags"));

    static final long ACCESS_LOCATION_TYPE = ACCESS_DESC.byteOffset(groupElement("location"), groupElement("type"));
    static final long ACCESS_LOCATION_ID = ACCESS_DESC.byteOffset(groupElement("location"), groupElement("id"));
    static final long ACCESS_FLAGS = ACCESS_DESC.byteOffset(groupElement("flags"));

    private CudaLayouts() {
    }

    /**
     * Properties for plain device memory on {@code device}: pinned (the only VMM type), exportable
     * as a POSIX file descriptor when {@code exportable}, no compression or RDMA flags. Everything
     * not set stays zero, as cuda.h requires.
     */
    static MemorySegment allocationProp(Arena arena, int device, boolean exportable) {
        MemorySegment prop = arena.allocate(ALLOCATION_PROP); // zero-filled
        prop.set(JAVA_INT, PROP_TYPE, CU_MEM_ALLOCATION_TYPE_PINNED);
        prop.set(JAVA_INT, PROP_REQUESTED_HANDLE_TYPES,
                exportable ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE);
        prop.set(JAVA_INT, PROP_LOCATION_TYPE, CU_MEM_LOCATION_TYPE_DEVICE);
        prop.set(JAVA_INT, PROP_LOCATION_ID, device);
        return prop;
    }

    /**
     * One access descriptor per device of {@code grant} (read/write) and of {@code revoke} (none),
     * both {@link dev.vmmkit.driver.DeviceSet}s; returns the array, {@code Long.bitCount} entries long.
     */
    static MemorySegment accessDescriptors(Arena arena, long grant, long revoke) {
        int count = Long.bitCount(grant) + Long.bitCount(revoke);
        MemorySegment descs = arena.allocate(ACCESS_DESC, Math.max(1, count));
        long at = 0;
        for (long set : new long[]{grant, revoke}) {
            for (long rest = set; rest != 0; rest &= rest - 1, at += ACCESS_DESC.byteSize()) {
                descs.set(JAVA_INT, at + ACCESS_LOCATION_TYPE, CU_MEM_LOCATION_TYPE_DEVICE);
                descs.set(JAVA_INT, at + ACCESS_LOCATION_ID, Long.numberOfTrailingZeros(rest));
                descs.set(JAVA_INT, at + ACCESS_FLAGS,
                        set == grant ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_NONE);
            }
        }
        return descs;
    }

    /** One access descriptor granting {@code device} read/write access. */
    static MemorySegment readWriteAccess(Arena arena, int device) {
        MemorySegment desc = arena.allocate(ACCESS_DESC);
        desc.set(JAVA_INT, ACCESS_LOCATION_TYPE, CU_MEM_LOCATION_TYPE_DEVICE);
        desc.set(JAVA_INT, ACCESS_LOCATION_ID, device);
        desc.set(JAVA_INT, ACCESS_FLAGS, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
        return desc;
    }
}
