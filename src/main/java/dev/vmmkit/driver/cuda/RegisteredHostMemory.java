package dev.vmmkit.driver.cuda;

import static dev.vmmkit.driver.cuda.CudaErrors.failure;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.vmmkit.driver.CallText;
import dev.vmmkit.driver.CudaResult;
import dev.vmmkit.driver.DriverException;
import dev.vmmkit.driver.HostPages;
import dev.vmmkit.driver.LibC;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Pinned host memory made the other way ({@code VMM_PINNED_HOST=register}): anonymous memory from
 * mmap, advised to transparent huge pages, then page-locked and mapped for the device by
 * cuMemHostRegister, after several threads have faulted it in ({@link HostPages}). cuMemHostAlloc
 * locks and maps 4 KiB pages one by one (about 1.5 GiB/s measured on an H100 host); huge pages cut
 * the pages the kernel and the driver walk 512-fold. {@code scripts/gpu/pause-resume.sh} pins both
 * ways before its rows.
 */
final class RegisteredHostMemory {
    /** CU_MEMHOSTREGISTER_PORTABLE: pinned for every context. */
    private static final int CU_MEMHOSTREGISTER_PORTABLE = 1;

    private final CudaDriver driver;
    private final ConcurrentHashMap<Long, Long> sizes = new ConcurrentHashMap<>();

    RegisteredHostMemory(CudaDriver driver) {
        this.driver = driver;
    }

    long allocate(long bytes) {
        String text = CallText.pinnedAllocate(bytes);
        long address = LibC.mmap(0, bytes, LibC.PROT_READ | LibC.PROT_WRITE, LibC.MAP_PRIVATE | LibC.MAP_ANONYMOUS, -1, 0);
        if (address == LibC.MAP_FAILED) {
            throw new DriverException(CudaResult.OUT_OF_MEMORY, "mmap: " + LibC.describeErrno(LibC.errno()), text);
        }
        LibC.madvise(address, bytes, LibC.MADV_HUGEPAGE); // advice only: without huge pages it still works
        HostPages.faultIn(address, bytes);
        driver.prepare("cuMemHostRegister_v2");
        int result;
        try {
            result = (int) Calls.cuMemHostRegister.invokeExact(address, bytes, CU_MEMHOSTREGISTER_PORTABLE);
        } catch (Throwable t) {
            LibC.munmap(address, bytes);
            throw new IllegalStateException("cuMemHostRegister_v2", t);
        }
        if (result != CudaResult.SUCCESS) {
            LibC.munmap(address, bytes);
            throw failure(result, text);
        }
        sizes.put(address, bytes);
        return address;
    }

    /** True when {@code address} was made here (and not freed yet). */
    boolean owns(long address) {
        return sizes.containsKey(address);
    }

    void free(long address) {
        Long bytes = sizes.get(address);
        if (bytes == null) throw new IllegalArgumentException("not registered host memory: " + address);
        driver.prepare("cuMemHostUnregister");
        int result;
        try {
            result = (int) Calls.cuMemHostUnregister.invokeExact(address);
        } catch (Throwable t) {
            throw new IllegalStateException("cuMemHostUnregister", t);
        }
        if (result != CudaResult.SUCCESS) throw failure(result, CallText.pinnedFree(address));
        sizes.remove(address);
        LibC.munmap(address, bytes);
    }

    @SuppressWarnings("restricted")
    private static final class Calls {
        private static final SymbolLookup LOOKUP = SymbolLookup.libraryLookup(CudaApi.LIBRARY, Arena.global());
        static final MethodHandle cuMemHostRegister = bind("cuMemHostRegister_v2", JAVA_LONG, JAVA_LONG, JAVA_INT);
        static final MethodHandle cuMemHostUnregister = bind("cuMemHostUnregister", JAVA_LONG);

        private static MethodHandle bind(String symbol, MemoryLayout... arguments) {
            MemorySegment address = LOOKUP.find(symbol).orElseThrow(() -> new IllegalStateException(symbol + " not in " + CudaApi.LIBRARY));
            return Linker.nativeLinker().downcallHandle(address, FunctionDescriptor.of(JAVA_INT, arguments));
        }
    }
}
