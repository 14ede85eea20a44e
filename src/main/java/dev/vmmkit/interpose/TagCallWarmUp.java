package dev.vmmkit.interpose;

import java.lang.foreign.Arena;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

import static dev.vmmkit.interpose.NativeBootstrap.offset;
import static java.lang.foreign.ValueLayout.ADDRESS;

/**
 * Calls the shim's memory-tag entry points through their own upcall stubs with arguments that reach
 * no allocator, so that a program's first pause and resume do not run that path for the first time:
 * on an H200, entering a process's first pause took 170-190 us and reading its tag's name 100-150 us
 * in the interpreter, before any of the pause's own work (the whole call of torch_memory_saver adds
 * about 50 us to its driver calls). Safe at any time, beside a program's own calls: a region opened
 * for device -1 finds no allocator, and a pause or resume of the empty name is the warm-up's own
 * ({@link TagCalls}: the shim never passes an empty name), which reads the allocators' tags and
 * changes nothing.
 */
final class TagCallWarmUp {
    /** Rounds for the JIT's first tier to compile the path (about 200 calls). */
    static final int ROUNDS = 300;
    private static final int NO_DEVICE = -1;

    private TagCallWarmUp() {
    }

    /**
     * Calls each tag entry point of the shim's {@code table} {@code rounds} times; returns the rounds
     * done (a failure only ends the warm-up).
     */
    static int run(MemorySegment table, int rounds) {
        int done = 0;
        try {
            Linker linker = Linker.nativeLinker();
            MethodHandle regionBegin = downcall(linker, table, "region_begin");
            MethodHandle regionEnd = downcall(linker, table, "region_end");
            MethodHandle pause = downcall(linker, table, "pause");
            MethodHandle resume = downcall(linker, table, "resume");
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment name = arena.allocateFrom("vmmkit-warm-up");
                int length = (int) name.byteSize() - 1;
                for (; done < rounds; done++) {
                    int begun = (int) regionBegin.invokeExact(name.address(), length, 0, NO_DEVICE);
                    int ended = (int) regionEnd.invokeExact(NO_DEVICE);
                    int paused = (int) pause.invokeExact(name.address(), 0, NO_DEVICE, TagCalls.KEEP_AS_SET);
                    int resumed = (int) resume.invokeExact(name.address(), 0, NO_DEVICE);
                }
            }
        } catch (Throwable e) {
            // A warm-up is worth nothing once it fails; the program's own calls report real problems.
        }
        return done;
    }

    /** A downcall to the stub in the table's entry {@code field}, with the signature the table gives it. */
    private static MethodHandle downcall(Linker linker, MemorySegment table, String field) {
        return linker.downcallHandle(table.get(ADDRESS, offset(field)), NativeBootstrap.descriptor(field));
    }
}
