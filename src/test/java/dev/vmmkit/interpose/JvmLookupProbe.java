package dev.vmmkit.interpose;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.nio.file.Path;

import static java.lang.foreign.ValueLayout.ADDRESS;

/**
 * Run in a JVM with the shim preloaded and the stand-in driver on the library path (by
 * {@link DriverApiEndToEndTest}): prints where the JVM's own lookup of {@code cuMemAlloc_v2} in
 * libcuda.so.1 lands (as vmmkit's CUDA driver binding looks functions up), where a lookup by a
 * program lands (the shim's dlsym, the one a program's calls bind to, called from outside the JVM's
 * libraries: here from an FFM downcall), and the stand-in's own function. Argument: the shim's path.
 */
public final class JvmLookupProbe {
    private JvmLookupProbe() {
    }

    @SuppressWarnings("restricted")
    public static void main(String[] args) throws Throwable {
        Linker linker = Linker.nativeLinker();
        SymbolLookup libcuda = SymbolLookup.libraryLookup("libcuda.so.1", Arena.global());
        MemorySegment jvm = libcuda.find("cuMemAlloc_v2").orElseThrow();
        MemorySegment own = (MemorySegment) linker.downcallHandle(libcuda.find("fake_cuda_own_mem_alloc").orElseThrow(),
                FunctionDescriptor.of(ADDRESS)).invokeExact();
        MemorySegment handle = (MemorySegment) linker.downcallHandle(linker.defaultLookup().find("dlopen").orElseThrow(),
                FunctionDescriptor.of(ADDRESS, ADDRESS, java.lang.foreign.ValueLayout.JAVA_INT))
                .invokeExact(Arena.global().allocateFrom("libcuda.so.1"), 2 /* RTLD_NOW */);
        SymbolLookup shim = SymbolLookup.libraryLookup(Path.of(args[0]), Arena.global());
        MemorySegment program = (MemorySegment) linker.downcallHandle(shim.find("dlsym").orElseThrow(),
                FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS)).invokeExact(handle, Arena.global().allocateFrom("cuMemAlloc_v2"));
        System.out.printf("jvm=%x own=%x program=%x%n", jvm.address(), own.address(), program.address());
    }
}
