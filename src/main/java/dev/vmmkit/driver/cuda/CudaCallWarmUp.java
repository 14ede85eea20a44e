package dev.vmmkit.driver.cuda;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * Links every downcall the allocator makes and calls each once with arguments the driver refuses
 * (a null handle, event or address, a size of zero), so it changes nothing. FFM builds each
 * downcall's handle when {@link CudaApi}'s holder class initialises, and the code behind it on its
 * first call; done here, on a background thread at start-up, neither lands inside a program's first
 * allocation or free. No context is made current and no call here can synchronise or allocate.
 */
public final class CudaCallWarmUp {
    private CudaCallWarmUp() {
    }

    /**
     * What opening a device's driver does besides the calls above ({@link CudaDriver#open}, inside the
     * program's first allocation; 4-7 ms there on an H200, most of it code running for the first
     * time): the structs it builds, and its queries, for no device (refused).
     */
    private static void openingCalls(MemorySegment out) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment prop = CudaLayouts.allocationProp(arena, -1, true);
            CudaLayouts.allocationProp(arena, -1, false);
            CudaLayouts.readWriteAccess(arena, -1);
            CudaApi.cuDeviceGetCount(out);
            CudaApi.cuDeviceGetAttribute(out, CudaLayouts.CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, -1);
            CudaApi.cuMemGetAllocationGranularity(out, prop, CudaLayouts.CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
        }
    }

    /** Links and exercises the downcalls; false when libcuda is not loaded here. Never throws. */
    public static boolean run() {
        try {
            if (!CudaApi.isLoaded()) return false;
            CudaScratch scratch = CudaScratch.get();
            MemorySegment out = scratch.first;
            CudaApi.cuMemAddressReserve(out, 0, 0, 0, 0);
            CudaApi.cuMemAddressFree(0, 0);
            CudaApi.cuMemCreate(out, 0, MemorySegment.NULL, 0);
            CudaApi.cuMemRelease(0);
            CudaApi.cuMemMap(0, 0, 0, 0, 0);
            CudaApi.cuMemSetAccess(0, 0, MemorySegment.NULL, 0);
            CudaApi.cuMemUnmap(0, 0);
            // Downcalls of one shape share their code: these cover the event calls' shapes too
            // (cuEventQuery is cuMemRelease's, cuEventRecord cuMemUnmap's, cuEventCreate cuDeviceGet's,
            // cuThreadExchangeStreamCaptureMode cuCtxGetCurrent's) without touching an event.
            CudaApi.cuDeviceGet(out, -1);
            CudaApi.cuCtxGetCurrent(out);
            // Shapes of their own: the fence thread's first device synchronisation and the first
            // memory query (the not-served sampler's) would otherwise build their code on their
            // first call, beside a program's first allocations. This thread has no current
            // context, so both are refused (CUDA_ERROR_INVALID_CONTEXT) without synchronising.
            CudaApi.cuCtxSynchronize();
            CudaApi.cuMemGetInfo(MemorySegment.NULL, MemorySegment.NULL);
            openingCalls(out);
            return true;
        } catch (RuntimeException | LinkageError e) {
            return false;
        }
    }
}
